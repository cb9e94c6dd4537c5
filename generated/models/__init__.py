"""Contains all the data models used in inputs/outputs"""

from .acquire_request import AcquireRequest
from .error import Error
from .error_detail import ErrorDetail
from .force_release_result import ForceReleaseResult
from .health import Health
from .lease import Lease
from .lock_list import LockList
from .lock_state import LockState
from .release_request import ReleaseRequest
from .release_result import ReleaseResult
from .renew_batch_item import RenewBatchItem
from .renew_batch_item_result import RenewBatchItemResult
from .renew_batch_request import RenewBatchRequest
from .renew_batch_result import RenewBatchResult
from .renew_request import RenewRequest

__all__ = (
    "AcquireRequest",
    "Error",
    "ErrorDetail",
    "ForceReleaseResult",
    "Health",
    "Lease",
    "LockList",
    "LockState",
    "ReleaseRequest",
    "ReleaseResult",
    "RenewBatchItem",
    "RenewBatchItemResult",
    "RenewBatchRequest",
    "RenewBatchResult",
    "RenewRequest",
)
