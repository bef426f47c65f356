"""Sessions started before audit rule 2 keep rule 1, with which their judgements were asked."""

from django.db import migrations, models

HELP = "How the scheduler draws audits (1: sessions started before rule 2)."


class Migration(migrations.Migration):
    dependencies = [("preferences", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="pairsession",
            name="audit_rule",
            field=models.PositiveSmallIntegerField(default=1, help_text=HELP),
        ),
        migrations.AlterField(
            model_name="pairsession",
            name="audit_rule",
            field=models.PositiveSmallIntegerField(default=2, help_text=HELP),
        ),
    ]
