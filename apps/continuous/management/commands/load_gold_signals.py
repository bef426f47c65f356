"""``manage.py load_gold_signals``: store the true signals of the shades-of-green tasks.

After this, any continuous study can use the calibration stimulus: give an item without audio
or video the metadata ``{"signal": "green-taska"}`` (or ``green-taskb``); the recorder shows
it as the green screen. Safe to run again.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.continuous.green import GREEN_TASKS, green_datasets_dir, green_signal_save, green_task


class Command(BaseCommand):
    help = "Store the shades-of-green true signals as gold signals green-taska and green-taskb."

    def handle(self, *args: object, **options: object) -> None:
        datasets = green_datasets_dir()
        if datasets is None:
            raise CommandError(
                "No green_intensity data set: set STUDIO_DATASETS_DIR to the folder holding it."
            )
        for task in GREEN_TASKS:
            truth, _ = green_task(datasets, task)
            signal = green_signal_save(task, truth)
            self.stdout.write(f"{signal.key}: {signal.n_samples} samples, {signal.duration:g} s")
