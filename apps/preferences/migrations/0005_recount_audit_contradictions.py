"""The audit contradiction rate now counts contradicting audits only (calibration answers took
it above 100 %). Stored pairwise quality states hold the old count, so they are dropped: the
next processing (a submit, or the sweep that every process runs) finds every annotator behind
and recounts them from their judgements."""

from django.db import migrations


def forget_pairwise_states(apps, schema_editor) -> None:
    QualityState = apps.get_model("analytics", "QualityState")
    QualityState.objects.filter(question__kind="pairwise").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("preferences", "0004_undo_and_sides"),
        ("analytics", "0003_distinct_kappa_keys"),
    ]

    operations = [migrations.RunPython(forget_pairwise_states, migrations.RunPython.noop)]
