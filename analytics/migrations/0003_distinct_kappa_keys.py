"""The indicator once stored as "kappa" for every kind gets the name of its statistic.

Categorical: Cohen's kappa with the others on shared items (``cohen_kappa``); pairwise: Cohen's
kappa on the outcomes of shared pairs (``outcome_kappa``); continuous: kappa_SDA with the others
(``kappa_sda``). Renamed in the stored snapshots (per-annotator values and the flags they list)
and in the flags, so the trend lines and the flags' history go on across the rename. The
mapping is frozen here (a migration must not follow later code).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

OLD = "kappa"
NEW = {"categorical": "cohen_kappa", "pairwise": "outcome_kappa", "continuous": "kappa_sda"}


def _renamed(snapshot: Any, old: str, new: str) -> bool:
    values = (snapshot.indicators or {}).get("values", {})
    changed = old in values
    if changed:
        values[new] = values.pop(old)
    for flag in snapshot.flags or []:
        if flag.get("indicator") == old:
            flag["indicator"] = new
            changed = True
    return changed


def rename(apps: Any, forward: bool) -> None:
    QualitySnapshot = apps.get_model("analytics", "QualitySnapshot")
    Flag = apps.get_model("analytics", "Flag")
    for kind, key in NEW.items():
        old, new = (OLD, key) if forward else (key, OLD)
        Flag.objects.filter(question__kind=kind, indicator=old).update(indicator=new)
        snapshots = QualitySnapshot.objects.filter(question__kind=kind).only("indicators", "flags")
        for snapshot in snapshots.iterator(chunk_size=500):
            if _renamed(snapshot, old, new):
                snapshot.save(update_fields=["indicators", "flags"])


class Migration(migrations.Migration):
    dependencies = [("analytics", "0002_dashboard"), ("studies", "0002_question_kind_registered")]

    operations = [
        migrations.RunPython(
            lambda apps, schema_editor: rename(apps, forward=True),
            lambda apps, schema_editor: rename(apps, forward=False),
        )
    ]
