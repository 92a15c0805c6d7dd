"""ServerProfile grouping into sources and selector resolution (pure)."""

from __future__ import annotations

import pytest

from ivoai.client.knowledge.errors import DisabledSourceError, UnknownSourceError
from ivoai.client.knowledge.profiles import ServerProfile, build_sources, origin_of, select_sources
from ivoai.common.errors import ValidationError

BOTH = {"context": True, "memory": True}
EPS = {"context_mcp": "/v1/mcp/context", "memory_mcp": "/v1/memory/mcp"}


def prof(
    alias: str,
    purpose: str | None = None,
    group: str | None = None,
    priority: int = 100,
    enabled: bool = True,
    features: dict[str, bool] | None = None,
) -> ServerProfile:
    return ServerProfile(
        id=f"srv_{abs(hash(alias)):032x}"[:36],
        alias=alias,
        base_url=f"https://{alias}.example:8443",
        purpose=purpose or alias,
        redundancy_group=group,
        priority=priority,
        enabled=enabled,
        endpoints=EPS,
        features=BOTH if features is None else features,
    )


def test_replicas_of_one_purpose_and_group_form_one_source_in_priority_order() -> None:
    sources = build_sources([prof("b", "team", "g", 20), prof("a", "team", "g", 10), prof("docs")])
    assert [s.id for s in sources] == ["docs", "team/g"]
    team = sources[1]
    assert [m.alias for m in team.members] == ["a", "b"]
    assert team.primary.alias == "a"
    assert team.alias == "g"


def test_equal_priorities_are_ordered_by_alias_so_grouping_is_deterministic() -> None:
    one = build_sources([prof("y", "p", "g"), prof("x", "p", "g")])
    two = build_sources([prof("x", "p", "g"), prof("y", "p", "g")])
    assert one == two
    assert [m.alias for m in one[0].members] == ["x", "y"]


def test_purposes_never_mix_even_with_the_same_group_name() -> None:
    sources = build_sources([prof("a", "team", "g"), prof("b", "ops", "g")])
    assert [s.id for s in sources] == ["ops/g", "team/g"]
    assert all(len(s.members) == 1 for s in sources)


def test_ungrouped_servers_of_one_purpose_stay_independent_sources() -> None:
    assert [s.id for s in build_sources([prof("a", "team"), prof("b", "team")])] == ["a", "b"]


def test_disabled_profiles_are_not_members() -> None:
    sources = build_sources([prof("a", "team", "g", 10, enabled=False), prof("b", "team", "g", 20)])
    assert [m.alias for m in sources[0].members] == ["b"]


def test_kinds_follow_advertised_features() -> None:
    (source,) = build_sources([prof("a", features={"context": True, "memory": False})])
    assert source.kinds == frozenset({"context"})


def test_no_selector_selects_every_enabled_source() -> None:
    profiles = [prof("a"), prof("b"), prof("c", enabled=False)]
    assert [s.id for s in select_sources(profiles)] == ["a", "b"]


def test_selectors_match_alias_purpose_group_or_member_and_restrict_to_exactly_those() -> None:
    profiles = [prof("a", "team", "g", 10), prof("b", "team", "g", 20), prof("docs")]
    assert [s.id for s in select_sources(profiles, ["docs"])] == ["docs"]
    assert [s.id for s in select_sources(profiles, ["b"])] == ["team/g"]
    assert [s.id for s in select_sources(profiles, ["team"])] == ["team/g"]
    assert [s.id for s in select_sources(profiles, ["team/g", "docs"])] == ["docs", "team/g"]


def test_unknown_selector_fails_naming_it_and_the_valid_choices() -> None:
    with pytest.raises(UnknownSourceError) as info:
        select_sources([prof("a"), prof("docs")], ["nope"])
    assert "'nope'" in info.value.message
    assert "a, docs" in info.value.message
    assert info.value.exit_code == 2


def test_disabled_selector_fails_and_says_how_to_enable_it() -> None:
    with pytest.raises(DisabledSourceError) as info:
        select_sources([prof("a"), prof("old", enabled=False)], ["old"])
    assert "disabled" in info.value.message and "enable old" in info.value.message


def test_endpoint_urls_stay_on_the_profile_origin() -> None:
    p = prof("a")
    assert p.endpoint_url("context") == "https://a.example:8443/v1/mcp/context"
    assert origin_of("HTTPS://A.Example:443/x") == "https://a.example"
    with pytest.raises(ValidationError):
        ServerProfile(
            id="srv_1",
            alias="z",
            base_url="https://z",
            purpose="z",
            endpoints={"context_mcp": "https://evil/x"},
        ).endpoint_url("context")


def test_the_package_exports_a_pinned_public_api() -> None:
    import ivoai.client.knowledge as knowledge

    assert knowledge.__all__ == sorted(knowledge.__all__)
    assert knowledge.__all__ == [
        "KnowledgeSource",
        "RouterConfig",
        "RouterHandle",
        "ServerPool",
        "ServerProfile",
        "enabled_sources",
        "session_router",
        "start_session_router",
    ]
