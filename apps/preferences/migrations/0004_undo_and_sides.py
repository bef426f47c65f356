"""Undo (a retraction record per undone judgement, append-only) and the side item_a was shown on."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("preferences", "0003_adaptive_scheduler"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgement",
            name="side_a",
            field=models.CharField(
                blank=True,
                choices=[("A", "A (left)"), ("B", "B (right)")],
                default="",
                help_text="The side item_a was shown on (empty: stored before sides were recorded).",
                max_length=1,
            ),
        ),
        migrations.CreateModel(
            name="Retraction",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "judgement",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="retraction",
                        to="preferences.judgement",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
    ]
