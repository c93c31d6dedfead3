"""Regenerate the demo data: a year of sales with a trend, a December spike, nulls, duplicates.

It writes src/planexec/demo/sales.csv, the one copy (``planexec demo`` and the tests read it).
"""

from pathlib import Path

import numpy as np
import pandas as pd

rng = np.random.default_rng(2025)
rows = 3000
dates = pd.to_datetime("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, rows), unit="D")
products = rng.choice(
    ["Widget A", "Widget B", "Widget C", "Gadget X"], rows, p=[0.35, 0.25, 0.25, 0.15]
)
prices = {"Widget A": 24.0, "Widget B": 39.5, "Widget C": 12.25, "Gadget X": 89.0}
month = dates.month.to_numpy()
quantity = rng.integers(1, 12, rows) + (month // 3)  # demand grows over the year
quantity = np.where(month == 12, quantity * 2, quantity)  # holiday spike
frame = pd.DataFrame(
    {
        "transaction_id": [f"T{100000 + i}" for i in range(rows)],
        "date": dates.strftime("%Y-%m-%d"),
        "product": products,
        "region": rng.choice(["North", "South", "East", "West"], rows),
        "quantity": quantity,
        "unit_price": [prices[p] for p in products],
    }
)
frame["revenue"] = (frame["quantity"] * frame["unit_price"]).round(2)
frame = frame.sort_values("date").reset_index(drop=True)
revenue = frame["revenue"].astype(object)
revenue[rng.choice(rows, 45, replace=False)] = None
frame["revenue"] = revenue
frame.loc[rng.choice(rows, 20, replace=False), "region"] = None
frame = pd.concat([frame, frame.sample(60, random_state=7)]).sort_values("date")
out = Path(__file__).resolve().parents[1] / "src" / "planexec" / "demo" / "sales.csv"
frame.to_csv(out, index=False)
print(f"wrote {out} ({len(frame)} rows)")
