"""Sessions started before the adaptive scheduler keep trusting every answer (their judgements
were asked that way); new sessions verify answers as the annotator's reliability warrants."""

from django.db import migrations, models

HELP = (
    "The scheduler verifies answers as the annotator's measured reliability warrants (False: "
    "sessions started before it, which trust every answer)."
)


class Migration(migrations.Migration):
    dependencies = [("preferences", "0002_pairsession_audit_rule")]

    operations = [
        migrations.AddField(
            model_name="pairsession",
            name="adaptive",
            field=models.BooleanField(default=False, help_text=HELP),
        ),
        migrations.AlterField(
            model_name="pairsession",
            name="adaptive",
            field=models.BooleanField(default=True, help_text=HELP),
        ),
        migrations.AlterField(
            model_name="judgement",
            name="phase",
            field=models.CharField(
                choices=[
                    ("calibration", "Calibration"),
                    ("sort", "Sort"),
                    ("audit", "Audit"),
                    ("verify", "Verification"),
                ],
                max_length=11,
            ),
        ),
    ]
