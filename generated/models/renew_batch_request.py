from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.renew_batch_item import RenewBatchItem


T = TypeVar("T", bound="RenewBatchRequest")


@_attrs_define
class RenewBatchRequest:
    leases: list[RenewBatchItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        leases = []
        for leases_item_data in self.leases:
            leases_item = leases_item_data.to_dict()
            leases.append(leases_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "leases": leases,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.renew_batch_item import RenewBatchItem  # noqa: PLC0415

        d = dict(src_dict)
        leases = []
        _leases = d.pop("leases")
        for leases_item_data in _leases:
            leases_item = RenewBatchItem.from_dict(leases_item_data)

            leases.append(leases_item)

        renew_batch_request = cls(
            leases=leases,
        )

        renew_batch_request.additional_properties = d
        return renew_batch_request

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
