"""Question kinds: one :class:`QuestionKind` object per kind, registered once in the settings.

A kind (categorical labels, continuous traces, pairwise preferences, ...) lives in its own app
(``apps/<kind>/kind.py``) and is listed once in ``settings.QUESTION_KINDS`` (dotted paths of
the kind objects). Everything that differs between kinds is an attribute or a method of its
object: how its settings and answers are validated, whether it is answered in the annotator's
queue, how its quality statistics are kept (process pending answers, rebuild, count the
backlog), which indicators it derives and how they are judged and shown, the dashboard's extra
cards and the export functions of its answers. The rest of the studio (the quality pipeline,
publishing, flags, the dashboard) asks :func:`question_kind` and never names a kind.

See ``docs/adding-a-question-kind.md`` for the recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from analytics.config import clean_quality_override

if TYPE_CHECKING:
    from analytics.indicators import CardFigure, Derived, Indicator, Json, StudyFigure
    from analytics.intervals import IntervalSet
    from analytics.models import QualitySnapshot, QualityState
    from apps.annotations.models import Assignment
    from apps.items.models import Item
    from apps.studies.models import Label, Question
    from core.types import Account


class QuestionKind:
    """Everything the studio needs to know about one kind of question.

    Subclass it in the kind's app and list an instance in ``settings.QUESTION_KINDS``. The
    class attributes describe the kind; the methods are its behaviour. Methods without a
    default raise ``NotImplementedError``.

    Attributes
    ----------
    key : str
        The value stored in ``Question.kind`` (at most 12 characters).
    label : str
        Its readable name (the question form's choices, ``get_kind_display``).
    queue : bool
        Answered per item in the annotator's queue (``annotations_submit``); queue questions
        decide when an assignment is complete.
    indicators : tuple of Indicator
        The per-annotator figures :meth:`derive` computes, in table order, each with its
        label, format, direction and flag rule (:class:`analytics.indicators.Indicator`).
    count : str
        The indicator counting each annotator's work (annotators without work get no row).
    agreement : str
        The indicator that is "agreement with the others" (Landis-Koch band, trend sparkline);
        ``matrices["kappa"]`` of :meth:`derive` is its pair matrix (heatmap and MDS map).
    study_figures : tuple of StudyFigure
        Study-wide figures (summary, trend line, study-wide flag below a floor).
    answers_label : str
        What the summary calls the answers counted in ``study["n_ratings"]``.
    heatmap_note : str
        What the heatmap's pair figure is, for the sentence under the heatmap.
    overlap_unit : str or None
        What pairs share (``QUALITY_MIN_OVERLAP`` of them blank a cell); ``None`` if no
        minimum applies.
    pair_evidence : str
        What ``matrices["overlap"]`` of :meth:`derive` counts per pair (the heatmap's
        tooltips state it as the evidence of each pair figure).
    dashboard_cards : tuple of str
        Template names of extra cards pushed with every update (light ones).
    dashboard_plots : tuple of str
        Template names of extra cards pushed with the plots (at most every
        ``QUALITY_PLOT_INTERVAL`` seconds).
    dashboard_page_cards : tuple of str
        Template names of extra cards drawn on page load only (not pushed).
    card_figures : tuple of CardFigure
        The figures those extra cards show, each with its plain explanation (the cards print
        them in their legends and the figure guide lists them).
    annotators_note : str
        A sentence under the annotator table's heading (how to read a figure).
    export_functions : mapping of str to callable
        The functions of ``apps/*/exporting.py`` that export this kind's answers, by name
        (referenced, not reimplemented: the export modules own the file formats).
    has_labels : bool
        Questions of the kind have a scale of labels (``Label`` rows, ``Question.ordered``):
        the question editor shows its label rows and the "ordered" box.
    settings_form : type of django.forms.Form or None
        The form of the kind's settings in the question editor, one field per setting named
        like it, with help texts built from the constants :meth:`clean_settings` checks
        against; its ``cleaned_data`` goes to :meth:`clean_settings`. ``None``: the settings
        are typed as JSON only (the editor's "advanced" box).
    answer_settings : tuple of str
        Settings that give the answers their meaning (a trace's scale): refused once the
        question has answers (:meth:`answered`).
    preview_template : str or None
        Template of the editor's live preview, built from the answer controls the annotator's
        page includes; its context is ``question`` (unsaved) and :meth:`preview_context`.
    item_card : str or None
        Template of the kind's card on a manager's item page (answers that are not queue
        revisions: judgements the item was in, traces); its context is :meth:`item_context`.
    """

    key: ClassVar[str]
    label: ClassVar[str]
    queue: ClassVar[bool] = False
    indicators: ClassVar[tuple[Indicator, ...]] = ()
    count: ClassVar[str]
    agreement: ClassVar[str]
    study_figures: ClassVar[tuple[StudyFigure, ...]] = ()
    answers_label: ClassVar[str] = "Answers"
    heatmap_note: ClassVar[str] = ""
    overlap_unit: ClassVar[str | None] = "items"
    pair_evidence: ClassVar[str] = "items"
    dashboard_cards: ClassVar[tuple[str, ...]] = ()
    dashboard_plots: ClassVar[tuple[str, ...]] = ()
    dashboard_page_cards: ClassVar[tuple[str, ...]] = ()
    card_figures: ClassVar[tuple[CardFigure, ...]] = ()
    annotators_note: ClassVar[str] = ""
    export_functions: ClassVar[Mapping[str, Callable[..., Any]]] = {}
    has_labels: ClassVar[bool] = False
    settings_form: ClassVar[type[forms.Form] | None] = None
    answer_settings: ClassVar[tuple[str, ...]] = ()
    preview_template: ClassVar[str | None] = None
    item_card: ClassVar[str | None] = None

    # ----------------------------------------------------------------- questions and answers

    def clean_settings(self, raw: Any) -> dict[str, Any]:
        """Validate the question's own settings (without ``"quality"``), defaults filled in;
        raise ``ValidationError``. The default takes none."""
        if raw:
            raise ValidationError({"settings": f"{self.key} questions take no settings."})
        return {}

    def clean_value(
        self, question: Question, value: Any, assignment: Assignment | None
    ) -> tuple[Any, Label | None]:
        """Validate an answer; return ``(stored value, label or None)``.

        ``assignment`` is the annotator's assignment being answered (``None`` for a bulk
        import of a finished data set). Raise ``ValidationError`` if the answer is not valid.
        """
        raise ValidationError(
            {"question": f"{question.get_kind_display()} questions are not answered this way."}
        )

    def settings_problems(self, question: Question) -> dict[str, str]:
        """What is wrong with the question's (cleaned) settings given the question itself
        (setting -> message; the services refuse them): what :meth:`clean_settings` cannot
        see, such as a model run of another question. The default finds nothing."""
        return {}

    def answered(self, question: Question) -> bool:
        """Whether the question has answers (then its labels and :attr:`answer_settings`
        keep their meaning). The default counts its ``Annotation`` rows."""
        return question.annotations.exists()

    def item_problems(self, question: Question, item: Item) -> dict[str, str]:
        """What makes ``item`` (unsaved: an imported row) unfit for ``question``, which applies
        to it (field -> message; the import refuses the row with its line number). The default
        finds nothing."""
        return {}

    def preview_context(self, *, question: Question, labels: list[Label]) -> dict[str, Any]:
        """Context of :attr:`preview_template` for an unsaved ``question`` (settings complete)
        and its ``labels`` (unsaved, in scale order)."""
        return {}

    def scope_problem(self, question: Question) -> str:
        """What is wrong with the items the question's scope covers, for this kind ("" if
        nothing): the question editor and the overview show it as a warning. The default
        finds nothing."""
        return ""

    def progress(self, *, question: Question, annotator: Account) -> dict[str, int]:
        """The annotator's ``{"done": n, "total": n}`` on ``question``, as its page shows it
        (the one definition the home card and the kind's page share).

        The default, for queue kinds: the study's queue assignments completed of those
        assigned (every queue question of a study shares them).
        """
        from apps.annotations.selectors import annotator_progress

        study = question.study  # its questions prefetched by the home page: no query then
        queued = [q for q in study.questions.all() if q.kind in queue_kinds()]
        return annotator_progress(annotator=annotator, study=study, questions=queued)

    # ----------------------------------------------------------------- quality statistics

    def process(self, *, question_id: int) -> int:
        """Apply the question's pending answers to its ``QualityState`` (under the state row
        lock, :func:`analytics.pipeline.state_for_update`), publish after the commit
        (:func:`analytics.pipeline.publish_after_commit`); return how many were applied."""
        raise NotImplementedError

    def rebuild(self, *, question_id: int) -> Any:
        """Recompute the question's state from every current answer, then publish."""
        raise NotImplementedError

    def waiting(self, question_id: int) -> int | None:
        """How many answers the state has not applied yet, or ``None`` when the kind uses the
        annotation outbox (``analysis_pending``), which the pipeline counts itself."""
        return None

    def intervals(self, question: Question) -> IntervalSet | None:
        """Confidence intervals of the question's indicators from all its current answers
        (seconds of work: :mod:`analytics.intervals` calls it off the live path, at most every
        ``QUALITY_INTERVAL_SECONDS``); ``None``: the kind has no interval estimator."""
        return None

    # ----------------------------------------------------------------- indicators

    def derive(self, state: QualityState, question: Question, *, layout: Json | None) -> Derived:
        """The indicators, evidence, study figures and matrices of the stored state."""
        raise NotImplementedError

    def indicators_for(self, question: Question) -> tuple[Indicator, ...]:
        """The question's indicators: :attr:`indicators`, unless a rule depends on the
        question's settings (pairwise: its own transitivity floor)."""
        return self.indicators

    def publish_extras(
        self,
        derived: Derived,
        *,
        question: Question,
        state: QualityState,
        previous: QualitySnapshot | None,
        item_ids: list[int] | None,
        rebuild: bool,
        refresh: bool,
    ) -> None:
        """Figures beyond the statistics, added at publish time (categorical: per-item
        disagreement, Dawid-Skene competence). ``refresh``: the manager asked for a refit."""

    def dashboard_context(
        self, *, question: Question, snapshot: QualitySnapshot, names: list[str], plots: bool
    ) -> dict[str, Any]:
        """Context of the kind's extra dashboard cards (pushed ones) from the latest snapshot;
        ``names`` label its annotator axis, ``plots`` asks for the plot cards' context too."""
        return {}

    def page_context(self, *, question: Question, query: Mapping[str, str]) -> dict[str, Any]:
        """Context of the kind's page-only cards (``query``: the page's GET parameters)."""
        return {}

    def item_context(self, *, question: Question, item: Item) -> dict[str, Any]:
        """Context of :attr:`item_card` for one item: what the item got from ``question``;
        a ``"stimulus"`` template, if given, draws the stimulus in place of the item's media
        (a calibration item's green screen)."""
        return {}

    def indicator(self, key: str) -> Indicator:
        """The indicator spec of ``key``."""
        return next(spec for spec in self.indicators if spec.key == key)


def _load(path: str) -> QuestionKind:
    kind = import_string(path)
    if not isinstance(kind, QuestionKind):
        raise ImproperlyConfigured(f"QUESTION_KINDS: {path} is not a QuestionKind instance.")
    return kind


@cache
def question_kinds() -> dict[str, QuestionKind]:
    """Every registered kind by key, in ``settings.QUESTION_KINDS`` order."""
    kinds = [_load(path) for path in settings.QUESTION_KINDS]
    found = {kind.key: kind for kind in kinds}
    if len(found) != len(kinds):
        raise ImproperlyConfigured("QUESTION_KINDS lists a kind key twice.")
    return found


@receiver(setting_changed)
def _forget_kinds(*, setting: str, **kwargs: Any) -> None:
    if setting == "QUESTION_KINDS":
        question_kinds.cache_clear()


def question_kind(key: str) -> QuestionKind:
    """The registered kind ``key``; ``ValidationError`` for an unknown kind."""
    kind = question_kinds().get(key)
    if kind is None:
        raise ValidationError({"kind": f"Unknown question kind {key!r}."})
    return kind


def kind_choices() -> list[tuple[str, str]]:
    """``Question.kind``'s choices: the registered kinds."""
    return [(kind.key, kind.label) for kind in question_kinds().values()]


def queue_kinds() -> list[str]:
    """Keys of the kinds answered per item in the annotator's queue."""
    return [key for key, kind in question_kinds().items() if kind.queue]


QUALITY = "quality"  # the settings key of a question's quality overrides, any kind


def own_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """A question's settings without its quality overrides: what the kind's own validator
    (:meth:`QuestionKind.clean_settings`) reads."""
    return {key: value for key, value in (settings or {}).items() if key != QUALITY}


def clean_question_settings(kind: str, raw: Any) -> dict[str, Any]:
    """Validate a question's settings for its kind; raise ``ValidationError``.

    ``raw["quality"]`` (any kind) overrides the quality thresholds of this question: see
    :func:`analytics.config.clean_quality_override`; the rest goes to the kind's
    :meth:`QuestionKind.clean_settings`.
    """
    spec = question_kind(kind)
    if raw is not None and not isinstance(raw, dict):
        raise ValidationError({"settings": "Settings must be an object."})
    quality = (raw or {}).get(QUALITY)
    cleaned = spec.clean_settings(own_settings(raw))
    if quality is not None:
        cleaned[QUALITY] = clean_quality_override(quality, indicators=spec.indicators)
    return cleaned
