"""The lab's run files, typed: defined in :mod:`posenc.runs.lab_schema` (the run-file layer, which the
explorer reads too) and named here for the lab's own modules."""

from ...runs.lab_schema import (
    KINDS as KINDS,
)
from ...runs.lab_schema import (
    LAB_ADVICE as LAB_ADVICE,
)
from ...runs.lab_schema import (
    MACHINERY_CHECK as MACHINERY_CHECK,
)
from ...runs.lab_schema import (
    MAX_DEPTH as MAX_DEPTH,
)
from ...runs.lab_schema import (
    MAX_FILE_BYTES as MAX_FILE_BYTES,
)
from ...runs.lab_schema import (
    RETRIEVAL_BINS as RETRIEVAL_BINS,
)
from ...runs.lab_schema import (
    SCHEMA_VERSION as SCHEMA_VERSION,
)
from ...runs.lab_schema import (
    SUMMARIES_DIR as SUMMARIES_DIR,
)
from ...runs.lab_schema import (
    VERDICTS as VERDICTS,
)
from ...runs.lab_schema import (
    EvalEntry as EvalEntry,
)
from ...runs.lab_schema import (
    Progress as Progress,
)
from ...runs.lab_schema import (
    Results as Results,
)
from ...runs.lab_schema import (
    RunFileError as RunFileError,
)
from ...runs.lab_schema import (
    check_stamp as check_stamp,
)
from ...runs.lab_schema import (
    json_depth as json_depth,
)
from ...runs.lab_schema import (
    load_json_file as load_json_file,
)
from ...runs.lab_schema import (
    read_json_limited as read_json_limited,
)
from ...runs.lab_schema import (
    stamp as stamp,
)
from ...runs.lab_schema import (
    version_of as version_of,
)
