"""Record and replay at the step boundary: tool outputs and model replies as plain files.

``build_graph(recording=Recording(folder, "record"))`` keeps every tool call's output (keyed by
its tool and resolved arguments, scrubbed of secrets) and, with ``models=True``, every model
reply; ``Recording(folder, "replay")`` serves them without calling the tool (or the model, for
a reply recorded for the same call). The enforcement points are
:func:`planexec.execution.calls.call_tool` (every tool call of a step) and
:func:`planexec.llm.calls.request_reply` (every model call); the recording in use reaches them
through :func:`recording_in_use`, set around each node by ``build_graph``.

What a replay does not do: a replayed tool's side effects (the files it would write, the
messages it would send) do not happen; a file a later step reads must already be there.
"""

from planexec.recording.active import recording_in_use, using
from planexec.recording.files import RecordingError
from planexec.recording.recorder import (
    NoRecordingError,
    RecordedToolFailure,
    RecordedTransientFailure,
    Recording,
    RecordingStats,
)

__all__ = [
    "NoRecordingError",
    "RecordedToolFailure",
    "RecordedTransientFailure",
    "Recording",
    "RecordingError",
    "RecordingStats",
    "recording_in_use",
    "using",
]
