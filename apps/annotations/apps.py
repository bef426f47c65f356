from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "apps.annotations"
    label = "annotations"

    def ready(self) -> None:
        """Apply a study's active queue order off the request (the quality pipeline's job
        modes), and apply the orders left waiting on each sweep (apps.annotations.ordering)."""
        from analytics.pipeline import JOBS, SWEEP_HOOKS
        from apps.annotations.ordering import (
            QUEUE_ORDER_JOB,
            queue_order_apply,
            queue_orders_sweep,
        )

        JOBS[QUEUE_ORDER_JOB] = lambda study_id: queue_order_apply(study_id=study_id)
        SWEEP_HOOKS.append(queue_orders_sweep)
