"""Run files shared by the measuring apps (``posenc lab``, ``posenc eval``): the schema stamp, atomic
writes of every file an app writes (run files, reports, figures: :func:`~posenc.runs.files.atomic_write`,
under the umask, replacing a link rather than writing through it), the removal of an interrupted write's
temporaries, size-capped reads (:mod:`~posenc.runs.files`), an inter-process lock on a run folder
(:mod:`~posenc.runs.lock`), a checkpoint's content digest (:mod:`~posenc.runs.identity`), and
the errors ``torch.load`` raises on a corrupt file (the lesson's model files are read with them too).

Nothing here knows what an app measures; each app names its own schema (``posenc.eval/progress``)
and version, and turns :class:`ReadError` and :class:`FolderBusy` into its own one-line messages.
One exception is a file format two apps share: :mod:`posenc.runs.lab_schema`, the lab's run files,
typed, which the lab writes and the explorer reads (with the committed summaries in
``lab_summaries/``, :data:`posenc.runs.lab_schema.SUMMARIES_DIR`); :mod:`posenc.runs.lab_run`, a lab run
folder's layout and checkpoints and the trained model of a scheme, which the lab's export and the
lesson's attention map both read; :mod:`posenc.runs.extension`, what an extension method a run names
stands for at a length, alike for the lab and eval; and :mod:`posenc.runs.labels`, the one name of each
RoPE scaling that the lesson's pages and the lab's reports both print. Importing the package needs only
the standard library (:mod:`posenc.runs.lab_run` needs torch and the model, and is imported on its own).
"""

from .files import (
    CORRUPT_FILE_ERRORS,
    MAX_RUN_FILE_BYTES,
    TEMPORARY_SUFFIX,
    ReadError,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    file_mode,
    folder_mode,
    read_capped,
    read_json,
    remove_temporaries,
    save_figure,
    stamp,
    temporary_target,
    write_json,
)
from .identity import checkpoint_files, content_digest, digest_files
from .lock import FolderBusy, LockRefused, RunLock

__all__ = [
    "CORRUPT_FILE_ERRORS",
    "MAX_RUN_FILE_BYTES",
    "TEMPORARY_SUFFIX",
    "FolderBusy",
    "LockRefused",
    "ReadError",
    "RunLock",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "checkpoint_files",
    "content_digest",
    "digest_files",
    "file_mode",
    "folder_mode",
    "read_capped",
    "read_json",
    "remove_temporaries",
    "save_figure",
    "stamp",
    "temporary_target",
    "write_json",
]
