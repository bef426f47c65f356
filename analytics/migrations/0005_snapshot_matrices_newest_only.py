"""Only each question's newest snapshot keeps its pair matrices.

The dashboard draws the heatmap and the map from the newest snapshot alone; the older rows
are the trend lines' history and need their indicators only. Kept on every row, the matrices
grew the database by 2.3-2.6 MB a minute per question at 512 annotators (issue 22). Publishing
now empties the matrices of the row a new one follows; this empties those of the rows stored
before. Not reversible in content (the emptied matrices are not needed to go back).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import F, OuterRef, Subquery


def newest_only(apps: Any, schema_editor: Any) -> None:
    QualitySnapshot = apps.get_model("analytics", "QualitySnapshot")
    newest = QualitySnapshot.objects.filter(question=OuterRef("question")).order_by(
        "-created_at", "-id"
    )
    older = QualitySnapshot.objects.annotate(newest=Subquery(newest.values("pk")[:1])).exclude(
        pk=F("newest")
    )
    QualitySnapshot.objects.filter(pk__in=older.values("pk")).update(matrices={})


class Migration(migrations.Migration):
    dependencies = [("analytics", "0004_snapshot_state_version")]

    operations = [migrations.RunPython(newest_only, migrations.RunPython.noop)]
