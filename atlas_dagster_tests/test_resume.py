"""A relaunched run's family (orchestration/resume.py) and a retried fleet leader's role."""

from dagster import AssetKey, DagsterInstance, DagsterRun, instance_for_test
from dagster._core.storage.tags import PARENT_RUN_ID_TAG, RESUME_RETRY_TAG, ROOT_RUN_ID_TAG

from atlas_dagster.core.tags import BACKFILL_ID_TAG, COVERED_BY_TAG, FLEET_LEADER_TAG
from atlas_dagster.orchestration.resume import earlier_attempts
from atlas_dagster.orchestration.run_coordinator import fleet_tags

ASSETS = frozenset({AssetKey("tbt_raw_events_casino")})
RESUME_RETRY = {RESUME_RETRY_TAG: "true"}  # what Dagster's from-failure retry sets


def _run(instance: DagsterInstance, tags: dict[str, str], parent: DagsterRun | None = None):
    """A run record; a re-execution carries its parent and root as fields and tags (the run
    group is read from the tags), as Dagster's create_reexecuted_run writes them."""
    root = (parent.root_run_id or parent.run_id) if parent else None
    family = {PARENT_RUN_ID_TAG: parent.run_id, ROOT_RUN_ID_TAG: root} if parent else {}
    run = DagsterRun(
        job_name="__ASSET_JOB",
        tags={**tags, **family},
        asset_selection=ASSETS,
        parent_run_id=parent.run_id if parent else None,
        root_run_id=root,
    )
    return instance.add_run(run)


def test_a_retry_from_failure_resumes_its_whole_family_and_a_first_run_none() -> None:
    with instance_for_test() as instance:
        first = _run(instance, {})
        assert earlier_attempts(instance, first) == []
        second = _run(instance, RESUME_RETRY, parent=first)
        assert earlier_attempts(instance, second) == [first.run_id]
        reload_all = _run(instance, {}, parent=first)  # "re-execute all": reloads everything
        third = _run(instance, RESUME_RETRY, parent=second)
        assert set(earlier_attempts(instance, third)) == {
            first.run_id,
            second.run_id,
            reload_all.run_id,
        }
        assert earlier_attempts(instance, reload_all) == []


def test_a_retried_fleet_leader_leads_again() -> None:
    """The retry inherits the leader's tags; found among the leaders it would be covered by
    itself and load nothing."""
    with instance_for_test() as instance:
        leader = _run(instance, {BACKFILL_ID_TAG: "b", FLEET_LEADER_TAG: "true"})
        retry = _run(instance, {BACKFILL_ID_TAG: "b", FLEET_LEADER_TAG: "true"}, parent=leader)
        assert fleet_tags(instance, retry, ASSETS) == {FLEET_LEADER_TAG: "true"}
        covered = _run(instance, {BACKFILL_ID_TAG: "b"})
        assert COVERED_BY_TAG in (fleet_tags(instance, covered, ASSETS) or {})
