"""The project's code location with stock AutomationCondition.eager() on gold: the reference."""

from dagster import AssetsDefinition, AutomationCondition, Definitions

from atlas_dagster.definitions import build_definitions
from atlas_dagster.gold.tables import GOLD_TABLES


def _eager(asset: AssetsDefinition) -> AssetsDefinition:
    if not any(key.to_user_string() in GOLD_TABLES for key in asset.keys):
        return asset
    return asset.map_asset_specs(
        lambda spec: spec.replace_attributes(automation_condition=AutomationCondition.eager())
    )


_project = build_definitions()
defs = Definitions(
    assets=[_eager(asset) for asset in _project.assets or []],
    jobs=_project.jobs,
    sensors=_project.sensors,
    resources=_project.resources,
    executor=_project.executor,
)
