"""Record and replay at the step boundary: tool outputs and model replies as plain files.

``build_graph(recording=Recording(folder, "record"))`` keeps every tool call's output (keyed by
its tool and resolved arguments, scrubbed of secrets) and, with ``models=True``, every model
reply; ``Recording(folder, "replay")`` serves them without calling the tool (or the model, for
a reply recorded for the same call). The enforcement points are
:func:`planexec.execution.calls.call_tool` (every tool call of a step) and
:func:`planexec.llm.calls.request_reply` (every model call); the recording in use reaches them
through :func:`recording_in_use`, set around each node by ``build_graph``.

What a replay does not do: a replayed tool's side effects (the files it would write, the
messages it would send) do not happen; a file a later step reads must already be there. So a
step served from a recording says so (:mod:`planexec.recording.replayed`): ``replayed: true``
in its step record, ``planexec_replayed: true`` on its traced tool run, ``(replayed)`` in
``planexec show``, and the files it names are not the run's artifacts. A replayed output is
checked as a live one is (storable, the tool's output schema, this run's secrets replaced),
and the file paths it names must lie in the workspace (they need not exist).
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
