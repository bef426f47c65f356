"""``manage.py load_demo [--skip-real-data]``: demo accounts and studies, safe to run again.

Each study comes from one builder function listed in :data:`BUILDERS`; a builder finds its
study by name and leaves it alone if it is already there, so a second run changes nothing.
Later demos (continuous traces, pairwise preferences) add a builder to the list.
"""

from __future__ import annotations

import csv
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.models import Assignment, Revision
from apps.annotations.services import annotations_submit
from apps.items.services import items_bulk_create
from apps.studies.datasets import datasets_dir
from apps.studies.models import Membership, Question, Study
from apps.studies.selectors import study_creation_permission
from apps.studies.services import membership_add, question_create, study_create, study_set_status

DEMO_PASSWORD = "demo-password-1"
MANAGER = "manager"
ADMIN = "admin"
ANNOTATORS = ("ann1", "ann2", "ann3")


@dataclass(frozen=True)
class DemoContext:
    """What every study builder gets: the demo accounts and where real data sets live."""

    manager: AbstractBaseUser
    annotators: dict[str, AbstractBaseUser]
    datasets_dir: Path | None  # None: real data skipped


Builder = Callable[[DemoContext], str]


def _existing(ctx: DemoContext, name: str) -> Study | None:
    return Study.objects.filter(name=name, created_by=ctx.manager).first()


# --- accounts -------------------------------------------------------------------------------


@transaction.atomic
def demo_users() -> tuple[AbstractBaseUser, dict[str, AbstractBaseUser]]:
    """The superuser, the manager (may create studies) and the annotators; made once."""
    User = get_user_model()
    if not User.objects.filter(username=ADMIN).exists():
        User.objects.create_superuser(username=ADMIN, email="", password=DEMO_PASSWORD)
    manager = _demo_user(MANAGER)
    manager.user_permissions.add(study_creation_permission())
    return manager, {name: _demo_user(name) for name in ANNOTATORS}


def _demo_user(username: str, *, password: str | None = DEMO_PASSWORD) -> AbstractBaseUser:
    """Get or create an account; a new one gets ``password`` (``None``: cannot log in)."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


# --- Emotions in sentences: running, categorical, simulated annotators ----------------------

EMOTIONS_NAME = "Emotions in sentences (demo)"
# Du & Hoste, "Another Approach to Agreement Measurement and Prediction with Emotion
# Annotations", Table 8: each label's averaged valence and arousal on 1-5 scales.
EMOTION_LABELS = [
    {"key": "joy", "name": "Joy", "valence": 4.1, "arousal": 3.6},
    {"key": "contentment", "name": "Contentment", "valence": 3.8, "arousal": 3.0},
    {"key": "surprise", "name": "Surprise", "valence": 3.6, "arousal": 3.4},
    {"key": "neutral", "name": "Neutral", "valence": 3.0, "arousal": 3.0},
    {"key": "confusion", "name": "Confusion", "valence": 3.0, "arousal": 2.9},
    {"key": "disappointment", "name": "Disappointment", "valence": 2.0, "arousal": 2.8},
    {"key": "disgust", "name": "Disgust", "valence": 2.0, "arousal": 3.2},
]
EMOTION_COORDINATES = {lab["key"]: (lab["valence"], lab["arousal"]) for lab in EMOTION_LABELS}
# (sentence, the emotion it was written to express): the simulation's ground truth.
_SENTENCE_LIST = [
    ("We won the final in the last second and the whole street is singing!", "joy"),
    ("She said yes! We're getting married in June!", "joy"),
    ("My test results came back clear and I could hug everyone in this waiting room.", "joy"),
    ("The puppy finally came home today and the kids haven't stopped laughing.", "joy"),
    ("I got the scholarship, all of it, I can't stop grinning.", "joy"),
    ("Best concert of my life, I'm still dancing in the kitchen.", "joy"),
    ("A warm cup of tea, a good book and rain on the window. Perfect.", "contentment"),
    ("The garden is finally done and I'm just sitting here watching the bees.", "contentment"),
    ("Dinner with old friends, nothing special, exactly what I needed.", "contentment"),
    ("Paid off the last loan this morning; everything feels settled.", "contentment"),
    ("The baby is asleep, the dishes are done, and the house is quiet.", "contentment"),
    ("It was a slow Sunday and I enjoyed every minute of it.", "contentment"),
    ("Wait, the shop on the corner is a bakery now? Since when?", "surprise"),
    ("I opened the door and my brother was standing there, back from Canada!", "surprise"),
    ("The exam was moved to tomorrow? Nobody told us!", "surprise"),
    ("Out of nowhere, the quiet kid in the back solved it in seconds.", "surprise"),
    ("I didn't expect the ending at all; the butler was innocent.", "surprise"),
    ("My old teacher remembered my name after twenty years.", "surprise"),
    ("The meeting starts at ten in room 4B.", "neutral"),
    ("The train to Ghent leaves from platform 3.", "neutral"),
    ("Please bring a pen and your student card.", "neutral"),
    ("The report has twelve pages and two appendices.", "neutral"),
    ("Tomorrow will be cloudy with a light wind from the west.", "neutral"),
    ("The library closes at eight on weekdays.", "neutral"),
    ("I read the manual three times and still don't know which cable goes where.", "confusion"),
    ("So is the party on Friday or Saturday? Everyone says something else.", "confusion"),
    ("Why would the form ask for my address twice in different formats?", "confusion"),
    ("He said he agreed, then voted against it. I don't get it.", "confusion"),
    ("The map shows a bridge here but there is only water.", "confusion"),
    ("Which of these forty buttons actually starts the machine?", "confusion"),
    ("We trained for months and didn't even make the second round.", "disappointment"),
    ("The restaurant everyone raved about was bland and overpriced.", "disappointment"),
    ("He promised to come to my recital and never showed up.", "disappointment"),
    ("The sequel ruined everything I loved about the first film.", "disappointment"),
    ("I waited all year for this trip and it rained every single day.", "disappointment"),
    ("There was a hair baked into the bread, and they still charged us.", "disgust"),
    ("The fridge at work smells like something died in it last month.", "disgust"),
    ("He spat on the floor right next to the food stall.", "disgust"),
    ("The hotel sheets had stains nobody should ever have to see.", "disgust"),
    ("They cheated the elderly out of their savings and laughed about it.", "disgust"),
]
SENTENCES = {f"s{n:02d}": sentence for n, sentence in enumerate(_SENTENCE_LIST, start=1)}
EMOTIONS_INSTRUCTIONS = """\
Read each sentence and choose the **one emotion it expresses most clearly**.

| Key | Emotion | Valence | Arousal |
|---|---|---|---|
{rows}

* Judge the sentence as written, not how you would feel in that situation.
* If no emotion comes through, choose **Neutral**.
* Press the number key to answer; you can undo your last answer.

Some sentences come back later a second time: answer them afresh.

The seven labels and their valence / arousal coordinates (1-5 scales) are Table 8 of
Du & Hoste, *Another Approach to Agreement Measurement and Prediction with Emotion
Annotations*. The sentences are made up for this demo.
"""


@dataclass(frozen=True)
class SimulatedAnnotator:
    """How a simulated annotator behaves: how often right, how fast, what else it picks."""

    username: str
    accuracy: float  # chance of choosing the sentence's intended emotion
    mean_ms: int
    neighbour_errors: bool  # wrong answers: the nearest label in valence-arousal space, or any
    share: float = 0.85  # share of the queue done


SIMULATED = (
    SimulatedAnnotator("ann2", accuracy=0.85, mean_ms=5200, neighbour_errors=True),
    # ann3 clicks almost at random and fast: the quality dashboard flags them, with its reason
    SimulatedAnnotator("ann3", accuracy=0.2, mean_ms=1200, neighbour_errors=False),
    # colleagues who cannot log in, so that robust z-scores have a crowd to compare with
    SimulatedAnnotator("sim-1", accuracy=0.9, mean_ms=4800, neighbour_errors=True),
    SimulatedAnnotator("sim-2", accuracy=0.8, mean_ms=6100, neighbour_errors=True),
    SimulatedAnnotator("sim-3", accuracy=0.85, mean_ms=3900, neighbour_errors=True),
)


@transaction.atomic
def emotions_study(ctx: DemoContext) -> str:
    """A running study: seven emotions, 40 sentences; ann2 and sim-1..3 careful, ann3 close to
    random (flagged on the dashboard), ann1 with everything still to do."""
    study = _existing(ctx, EMOTIONS_NAME)
    if study is not None:
        return f"{EMOTIONS_NAME!r} is already there (study {study.pk})."
    rows = "\n".join(
        f"| {n} | {lab['name']} | {lab['valence']} | {lab['arousal']} |"
        for n, lab in enumerate(EMOTION_LABELS, start=1)
    )
    study = study_create(
        creator=ctx.manager,
        name=EMOTIONS_NAME,
        instructions=EMOTIONS_INSTRUCTIONS.format(rows=rows),
        overlap=None,
        repeat_rate=0.1,
    )
    question = question_create(
        study=study,
        key="emotion",
        prompt="Which emotion does the sentence express?",
        labels=[{**label, "shortcut": str(n)} for n, label in enumerate(EMOTION_LABELS, start=1)],
    )
    items_bulk_create(
        study=study,
        rows=[{"external_id": key, "text": text} for key, (text, _) in SENTENCES.items()],
    )
    simulated = {
        how.username: ctx.annotators.get(how.username) or _demo_user(how.username, password=None)
        for how in SIMULATED
    }
    for user in {**ctx.annotators, **simulated}.values():
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    done = sum(
        _simulate(study=study, question=question, how=how, user=simulated[how.username])
        for how in SIMULATED
    )
    return f"{EMOTIONS_NAME!r}: study {study.pk}, {len(SENTENCES)} items, {done} answers."


def _simulate(
    *, study: Study, question: Question, how: SimulatedAnnotator, user: AbstractBaseUser
) -> int:
    """Answer the first ``how.share`` of the user's queue through the normal submit service.

    Each answer is drawn from a generator seeded by annotator, item and round, so the demo data
    is the same on every machine whatever the database ids.
    """
    queue = list(
        Assignment.objects.filter(study=study, annotator=user)
        .select_related("item")
        .order_by("position", "round", "id")
    )
    todo = queue[: round(len(queue) * how.share)]
    for assignment in todo:
        item_id = assignment.item.external_id
        rng = random.Random(f"{how.username}-{item_id}-{assignment.round}")
        annotations_submit(
            annotator=user,
            assignment=assignment,
            answers={question: {"label": _pick(SENTENCES[item_id][1], how, rng)}},
            idempotency_key=uuid.UUID(int=rng.getrandbits(128), version=4),
            time_spent_ms=max(400, round(rng.gauss(how.mean_ms, how.mean_ms / 3))),
            source=Revision.Source.API,
        )
    return len(todo)


def _pick(emotion: str, how: SimulatedAnnotator, rng: random.Random) -> str:
    """The intended emotion with probability ``how.accuracy``, otherwise a mistake."""
    if rng.random() < how.accuracy:
        return emotion
    others = [key for key in EMOTION_COORDINATES if key != emotion]
    if not how.neighbour_errors:
        return rng.choice(others)
    valence, arousal = EMOTION_COORDINATES[emotion]
    return min(
        others,
        key=lambda key: (
            (EMOTION_COORDINATES[key][0] - valence) ** 2
            + (EMOTION_COORDINATES[key][1] - arousal) ** 2
        ),
    )


# --- Rzhetsky et al. (2009): a closed study from real data ---------------------------------

RZHETSKY_NAME = "Biomedical text fragments (Rzhetsky et al. 2009)"
RZHETSKY_ANNOTATORS = 8
RZHETSKY_INSTRUCTIONS = """\
A finished study loaded from real data, to explore the analytics: {items:,} biomedical text
fragments, each labelled by **3 of 8 annotators** in a rotating panel design, on an ordinal
scale of codes 1-5 (-1 in the source file means "not annotated" and is left out).

Only the labels are published, not the fragments' text nor the meaning of each code, so the
items here show placeholders and the labels are named *Code 1* to *Code 5*.

**Source and credit.** Rzhetsky, A., Shatkay, H. and Wilbur, W. J. (2009), "How to get the most
out of your curation effort", *PLoS Computational Biology* 5(5): e1000391,
[doi:10.1371/journal.pcbi.1000391](https://doi.org/10.1371/journal.pcbi.1000391). The file
used is `data/e-2.txt` of the pyAnno 2.0.2 source distribution. Copyright 2011, pyAnno
developers; redistributed under the BSD 2-clause licence.
"""


def read_rzhetsky(path: Path) -> Iterator[list[int]]:
    """Rows of label codes (one per annotator, -1 = not annotated) from ``annotations.csv``."""
    with path.open(newline="") as stream:
        for cells in csv.reader(stream):
            codes = [int(cell) for cell in cells if cell.strip()]
            if codes:
                if len(codes) != RZHETSKY_ANNOTATORS:
                    raise ValueError(f"{path}: a row with {len(codes)} annotators, not 8.")
                yield codes


@transaction.atomic
def rzhetsky_study(ctx: DemoContext) -> str:
    """A closed study with the 15,521 items and 8 annotators of Rzhetsky et al. (2009)."""
    path = ctx.datasets_dir / "rzhetsky2009" / "annotations.csv" if ctx.datasets_dir else None
    if path is None or not path.exists():
        why = f"no {path}" if path else "real data skipped"
        return f"{RZHETSKY_NAME!r}: skipped ({why})."
    study = _existing(ctx, RZHETSKY_NAME)
    if study is not None:
        return f"{RZHETSKY_NAME!r} is already there (study {study.pk})."
    table = list(read_rzhetsky(path))
    study = study_create(
        creator=ctx.manager,
        name=RZHETSKY_NAME,
        instructions=RZHETSKY_INSTRUCTIONS.format(items=len(table)),
        overlap=3,
    )
    question_create(
        study=study,
        key="code",
        prompt="Which code (1-5) does the fragment get?",
        ordered=True,
        labels=[{"key": f"code-{c}", "name": f"Code {c}", "shortcut": str(c)} for c in range(1, 6)],
    )
    names = [f"rz-{a}" for a in range(1, RZHETSKY_ANNOTATORS + 1)]
    for name in names:
        membership_add(
            study=study, user=_demo_user(name, password=None), role=Membership.Role.ANNOTATOR
        )
    ids = [f"fragment-{n:05d}" for n in range(1, len(table) + 1)]
    placeholder = "Fragment {n} of Rzhetsky et al. (2009); its text is not published."
    items_bulk_create(
        study=study,
        rows=[
            {"external_id": external_id, "text": placeholder.format(n=n)}
            for n, external_id in enumerate(ids, start=1)
        ],
    )
    stored = annotations_import_finished(
        study=study,
        records=(
            FinishedAnnotation(item=external_id, annotator=name, question="code", value=f"code-{c}")
            for external_id, codes in zip(ids, table, strict=True)
            for name, c in zip(names, codes, strict=True)
            if c != -1
        ),
    )
    study_set_status(study=study, status=Study.Status.CLOSED)
    return f"{RZHETSKY_NAME!r}: study {study.pk}, {len(table)} items, {stored} answers."


def pairwise_study(ctx: DemoContext) -> str:
    """A running pairwise-preference study (transitivity pruning), from apps.preferences.

    ann2 ranks carefully and ann3 half at random; ann1 is left to try the comparison page.
    """
    from apps.demo.pairwise import load_pairwise_demo

    order = ("ann2", "ann3", "ann1")
    return load_pairwise_demo(
        manager=ctx.manager, annotators=[ctx.annotators[name] for name in order]
    )


def arena_study(ctx: DemoContext) -> str:
    """A running model arena (three models, six prompts), from apps.arena.

    ann2 votes carefully and ann3 half at random; ann1 is left to try the arena page.
    """
    from apps.demo.arena import load_arena_demo

    order = ("ann2", "ann3", "ann1")
    return load_arena_demo(manager=ctx.manager, annotators=[ctx.annotators[name] for name in order])


def continuous_study(ctx: DemoContext) -> str:
    """A running slider-trace study with the shades-of-green calibration stimulus, from
    apps.continuous, pre-filled with the ten real annotators when the data set is there."""
    from apps.continuous.models import TraceRecording
    from apps.demo.continuous import QUESTION_KEY, load_continuous_demo

    study = load_continuous_demo(
        manager=ctx.manager, annotators=list(ctx.annotators.values()), datasets=ctx.datasets_dir
    )
    traced = (
        "with the real shades-of-green traces"
        if TraceRecording.objects.filter(item__study=study, status="finished").exists()
        else "without real traces: no green_intensity_2016 data set"
    )
    return f"{study.name!r} ({traced}): traces at /studies/{study.pk}/traces/{QUESTION_KEY}/"


BUILDERS: list[Builder] = [
    emotions_study,
    rzhetsky_study,
    pairwise_study,
    arena_study,
    continuous_study,
]


class Command(BaseCommand):
    help = (
        "Create the demo accounts (password demo-password-1) and demo studies. Running it again "
        "changes nothing. The real data sets shipped with the studio "
        "are loaded too ($STUDIO_DATASETS_DIR names another folder of the same layout)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--skip-real-data",
            action="store_true",
            help="Leave out the studies built from real data sets (quick).",
        )

    def handle(self, *args: Any, skip_real_data: bool, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError(
                f"The demo makes accounts whose password ({DEMO_PASSWORD}) is published: "
                "never with STUDIO_PRODUCTION=1."
            )
        manager, annotators = demo_users()
        ctx = DemoContext(
            manager=manager,
            annotators=annotators,
            datasets_dir=None if skip_real_data else datasets_dir(),
        )
        for build in BUILDERS:
            self.stdout.write(build(ctx))
        self.stdout.write(self._logins())

    def _logins(self) -> str:
        rows = [
            ("username", "password", "role"),
            (ADMIN, DEMO_PASSWORD, "superuser: Django admin at /admin/"),
            (MANAGER, DEMO_PASSWORD, "manager of the demo studies"),
            ("ann1", DEMO_PASSWORD, "annotator, nothing done yet: try the queue"),
            ("ann2", DEMO_PASSWORD, "annotator, most items done (careful)"),
            ("ann3", DEMO_PASSWORD, "annotator, most items done (near random: see Quality)"),
        ]
        width = [max(len(row[i]) for row in rows) for i in range(2)]
        lines = [f"  {u:<{width[0]}}  {p:<{width[1]}}  {r}" for u, p, r in rows]
        lines.insert(1, f"  {'-' * width[0]}  {'-' * width[1]}  {'-' * 4}")
        note = (
            "  (sim-1..3, rz-1..8 and green-ann1..10 hold simulated or imported answers and"
            " cannot log in.)"
        )
        return "\nDemo logins:\n" + "\n".join(lines) + "\n" + note
