from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.error_detail import ErrorDetail
    from ..models.lease import Lease


T = TypeVar("T", bound="RenewBatchItemResult")


@_attrs_define
class RenewBatchItemResult:
    key: str
    """ 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone. """
    status: int
    """ 200 when renewed; else the status a single renewal would have got (409). """
    lease: Lease | Unset = UNSET
    error: ErrorDetail | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        status = self.status

        lease: dict[str, Any] | Unset = UNSET
        if not isinstance(self.lease, Unset):
            lease = self.lease.to_dict()

        error: dict[str, Any] | Unset = UNSET
        if not isinstance(self.error, Unset):
            error = self.error.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "status": status,
            }
        )
        if lease is not UNSET:
            field_dict["lease"] = lease
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.error_detail import ErrorDetail  # noqa: PLC0415
        from ..models.lease import Lease  # noqa: PLC0415

        d = dict(src_dict)
        key = d.pop("key")

        status = d.pop("status")

        _lease = d.pop("lease", UNSET)
        lease: Lease | Unset
        if isinstance(_lease, Unset):
            lease = UNSET
        else:
            lease = Lease.from_dict(_lease)

        _error = d.pop("error", UNSET)
        error: ErrorDetail | Unset
        if isinstance(_error, Unset):
            error = UNSET
        else:
            error = ErrorDetail.from_dict(_error)

        renew_batch_item_result = cls(
            key=key,
            status=status,
            lease=lease,
            error=error,
        )

        renew_batch_item_result.additional_properties = d
        return renew_batch_item_result

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
