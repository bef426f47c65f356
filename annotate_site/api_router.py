"""The one DRF router of the studio; each app registers its ViewSets here.

Routes under a study (``studies/{study_pk}/...``) are registered with a regex prefix; their
views use :class:`apps.studies.api.permissions.InStudyMixin` to resolve the study.
"""

from rest_framework.routers import DefaultRouter

from apps.accounts.api.views import InvitationViewSet, TokenViewSet
from apps.adjudication.api.views import AggregatedLabelsViewSet
from apps.annotations.api.views import AnnotationViewSet, StudyAnnotationViewSet
from apps.arena.api.views import StudyArenaViewSet
from apps.continuous.api.views import TraceViewSet
from apps.items.api.views import ItemViewSet
from apps.models_registry.api.views import ModelEndpointViewSet, ModelRunViewSet
from apps.preferences.api.views import JudgementViewSet, StudyPairViewSet
from apps.recruitment.api.views import GoldAnswerViewSet, GoldSignalViewSet
from apps.studies.api.views import MembershipViewSet, QuestionViewSet, StudyViewSet

IN_STUDY = r"studies/(?P<study_pk>[^/.]+)"

router = DefaultRouter()
# An annotator's answer loop first (answer, next item, judgement, arena vote, trace chunks):
# the resolver tries the routes in the order registered, so an answer is found after 6
# patterns and a trace chunk after 46, not behind the manager's routes
# (tests/annotate_site/test_urls.py). No two routes match one path: the order changes no match.
router.register("annotations", AnnotationViewSet, basename="annotation")
router.register(IN_STUDY, StudyAnnotationViewSet, basename="study-annotation")
router.register("judgements", JudgementViewSet, basename="judgement")
router.register(f"{IN_STUDY}/pairs", StudyPairViewSet, basename="study-pair")
router.register(f"{IN_STUDY}/arena", StudyArenaViewSet, basename="study-arena")
router.register(f"{IN_STUDY}/traces", TraceViewSet, basename="study-trace")
router.register("auth/tokens", TokenViewSet, basename="api-token-info")
router.register("studies", StudyViewSet, basename="study")
router.register(f"{IN_STUDY}/questions", QuestionViewSet, basename="study-question")
router.register(f"{IN_STUDY}/items", ItemViewSet, basename="study-item")
router.register(f"{IN_STUDY}/memberships", MembershipViewSet, basename="study-membership")
router.register(f"{IN_STUDY}/invitations", InvitationViewSet, basename="study-invitation")
router.register(f"{IN_STUDY}/model-runs", ModelRunViewSet, basename="study-model-run")
router.register(
    f"{IN_STUDY}/model-endpoints", ModelEndpointViewSet, basename="study-model-endpoint"
)
router.register(f"{IN_STUDY}/gold-answers", GoldAnswerViewSet, basename="study-gold-answer")
router.register(f"{IN_STUDY}/gold-signals", GoldSignalViewSet, basename="study-gold-signal")
router.register(
    f"{IN_STUDY}/aggregated-labels", AggregatedLabelsViewSet, basename="study-aggregated-labels"
)
