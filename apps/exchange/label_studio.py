"""Label Studio JSON: import an export as a finished study, export categorical answers as tasks.

**Import** (:func:`label_studio_import`). A Label Studio JSON export is a list of tasks, each
with ``data`` (the stimulus) and ``annotations`` (one per annotator, each with a ``result``
list). It becomes a new, closed study of the importing manager, so that its agreement shows on
the quality dashboard:

- one item per task: ``external_id`` the task ``id`` (or its position), the text from
  ``data.text`` or the media URL from ``data.image`` / ``audio`` / ``video``; the whole
  ``data`` and the task id are kept in the item's metadata;
- one categorical question per ``from_name`` of the results: ``choices`` (one choice per
  answer) gives an unordered scale whose labels are the choices seen, in order of first use;
  ``rating`` gives an ordered scale ``1`` .. the highest rating seen;
- one annotator account per ``completed_by`` (its id, else its e-mail), named
  ``ls<study id>-<id>``, which cannot sign in; cancelled annotations are skipped;
- the answers through :func:`apps.annotations.importing.annotations_import_finished` (time
  spent from ``lead_time``), after which the quality state is rebuilt.

What has no counterpart here is reported task by task and nothing is stored (all or nothing,
one transaction): a result of another type (``labels``, ``rectanglelabels``, ``textarea``,
``pairwise`` ...: a Label Studio pairwise result names no item pair of ours), several choices in
one answer, a task without text or media, a ``from_name`` that is both choices and rating.

**Export** (:func:`label_studio_tasks`, :func:`label_studio_config`). Each item becomes a task
(``data``: ``text``, the media URL under its kind, ``external_id``), each annotator's current
categorical answers one annotation whose results are ``choices`` with the label key, and
``completed_by`` names the annotator (username or pseudonym) in the shape Label Studio's own
exports use. :func:`label_studio_config` gives the labelling configuration (XML) of a project
that imports those tasks.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any
from xml.etree import ElementTree
from xml.sax.saxutils import quoteattr

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.selectors import current_annotations
from apps.exchange.identity import USERNAMES, annotator_names
from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_create, study_set_status
from core.limits import MAX_TIME_SPENT_MS, max_labels

MAX_ERRORS = 50
MEDIA_KEYS = {"image": Item.Kind.IMAGE, "audio": Item.Kind.AUDIO, "video": Item.Kind.VIDEO}
MAPPED_TYPES = ("choices", "rating")
KEY_LENGTH = 50


@dataclass
class _Scale:
    """A question read from the results: its kind of result and the values seen, in order."""

    type: str
    values: dict[str, None] = field(default_factory=dict)  # an ordered set
    fixed: bool = False  # given by the labelling configuration: no other value maps


@dataclass
class _Parsed:
    items: list[dict[str, Any]] = field(default_factory=list)
    scales: dict[str, _Scale] = field(default_factory=dict)
    # (item external id, annotator key, from_name, value, time spent in ms)
    answers: list[tuple[str, str, str, str, int | None]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def label_studio_import(
    *,
    manager: AbstractBaseUser,
    stream: IO[bytes] | IO[str],
    name: str,
    label_config: str = "",
) -> Study:
    """Create a closed study named ``name`` from a Label Studio JSON export; all or nothing.

    ``label_config`` is the project's labelling configuration (XML, Settings > Labeling
    Interface > Code in Label Studio): with it every ``<Choices>`` block gives its choices in
    their order and every ``<Rating>`` its ``maxRating``, including labels nobody chose; without
    it the scales are read from the answers. Raises ``ValidationError`` listing what cannot be
    mapped, task by task (at most :data:`MAX_ERRORS`), before anything is stored.
    """
    try:
        tasks = json.load(stream)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"Not a Label Studio JSON export: {exc}.") from None
    except RecursionError:
        raise ValidationError("Not a Label Studio JSON export: nested too deeply.") from None
    if isinstance(tasks, dict):  # a single task, as some exports of one task are
        tasks = [tasks]
    if not isinstance(tasks, list) or not tasks:
        raise ValidationError("A Label Studio JSON export is a non-empty list of tasks.")
    parsed = _Parsed(scales=_config_scales(label_config))
    _parse(tasks, parsed)
    for from_name, scale in parsed.scales.items():
        if len(scale.values) > max_labels():
            parsed.errors.append(
                f"{from_name!r}: more than {max_labels()} labels (the setting QUESTION_MAX_LABELS)."
            )
        if scale.type == "choices" and len(scale.values) < 2:
            parsed.errors.append(
                f"{from_name!r}: fewer than two choices in the answers; give the labelling "
                "configuration so that the question has its whole scale."
            )
    if parsed.errors:
        raise ValidationError(parsed.errors[:MAX_ERRORS])
    with transaction.atomic():
        return _store(parsed, manager=manager, name=name)


def _config_scales(label_config: str) -> dict[str, _Scale]:
    """The ``<Choices>`` and ``<Rating>`` blocks of a labelling configuration, by name."""
    if not label_config.strip():
        return {}
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError as exc:
        raise ValidationError(f"The labelling configuration is not XML: {exc}.") from None
    scales: dict[str, _Scale] = {}
    for element in root.iter():
        name = element.get("name")
        if element.tag == "Choices" and name:
            choices = [c.get("value") for c in element.iter("Choice") if c.get("value")]
            scales[name] = _Scale("choices", dict.fromkeys(choices), fixed=True)
        elif element.tag == "Rating" and name:
            top = element.get("maxRating", "5")
            if not top.isdigit() or not 2 <= int(top) <= max_labels():
                raise ValidationError(
                    f"Rating {name!r}: maxRating {top[:20]!r} is not from 2 to {max_labels()} "
                    "(the setting QUESTION_MAX_LABELS)."
                )
            values = dict.fromkeys(map(str, range(1, int(top) + 1)))
            scales[name] = _Scale("rating", values, fixed=True)
    return scales


def _parse(tasks: list[Any], parsed: _Parsed) -> None:
    for number, task in enumerate(tasks, start=1):
        where = f"task {task.get('id', number) if isinstance(task, dict) else number}"
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            parsed.errors.append(f"{where}: no data object.")
            continue
        external_id = str(task.get("id", number))
        item = _item(task["data"], external_id=external_id)
        if item is None:
            parsed.errors.append(f"{where}: data has no text, image, audio or video.")
        else:
            parsed.items.append(item)
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            parsed.errors.append(f"{where}: annotations is not a list.")
            continue
        for annotation in annotations:
            if not isinstance(annotation, dict):
                parsed.errors.append(f"{where}: an annotation that is not an object.")
                continue
            if annotation.get("was_cancelled"):
                continue
            annotator = _annotator_key(annotation.get("completed_by"))
            if annotator is None:
                parsed.errors.append(f"{where}: an annotation without completed_by.")
                continue
            results = annotation.get("result") or []
            if not isinstance(results, list):
                parsed.errors.append(f"{where}: a result that is not a list.")
                continue
            for result in results:
                problem = _read_result(
                    result, parsed, external_id, annotator, _lead_time_ms(annotation)
                )
                if problem:
                    parsed.errors.append(
                        f"{where}, annotation {annotation.get('id', '?')}: {problem}"
                    )


def _lead_time_ms(annotation: Mapping[str, Any]) -> int | None:
    """The annotation's ``lead_time`` (s) in ms; none when absent or beyond a day's limit
    (:data:`core.limits.MAX_TIME_SPENT_MS`: a tab left open for days says nothing)."""
    lead_time = annotation.get("lead_time")
    if not isinstance(lead_time, int | float) or isinstance(lead_time, bool):
        return None
    if not 0 <= lead_time <= MAX_TIME_SPENT_MS / 1000:  # also nan
        return None
    return round(1000 * lead_time)


def _item(data: Mapping[str, Any], *, external_id: str) -> dict[str, Any] | None:
    metadata = {"label_studio": {"task": external_id, "data": dict(data)}}
    if isinstance(data.get("text"), str) and data["text"].strip():
        return {
            "external_id": external_id,
            "kind": "text",
            "text": data["text"],
            "metadata": metadata,
        }
    for key, kind in MEDIA_KEYS.items():
        if isinstance(data.get(key), str) and data[key]:
            return {
                "external_id": external_id,
                "kind": kind,
                "url": data[key],
                "metadata": metadata,
            }
    return None


def _annotator_key(completed_by: Any) -> str | None:
    if isinstance(completed_by, int) and not isinstance(completed_by, bool):
        return str(completed_by)
    if isinstance(completed_by, dict):
        key = completed_by.get("id") or completed_by.get("email")
        return str(key) if key not in (None, "") else None
    return None


def _read_result(
    result: Any, parsed: _Parsed, item: str, annotator: str, ms: int | None
) -> str | None:
    """Note one result's answer; return the problem if it has no counterpart here."""
    if not isinstance(result, dict):
        return "a result that is not an object."
    kind, from_name, value = result.get("type"), result.get("from_name"), result.get("value")
    if kind not in MAPPED_TYPES:
        return (
            f"result type {kind!r} (from_name {from_name!r}) has no counterpart here; "
            f"only {' and '.join(MAPPED_TYPES)} map to categorical questions."
        )
    if not isinstance(from_name, str) or not from_name or not isinstance(value, dict):
        return f"a {kind} result without from_name or value."
    if kind == "choices":
        choices = value.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], str):
            return f"{from_name!r}: {len(choices or [])} choices in one answer; one maps."
        answer = choices[0]
    else:
        rating = value.get("rating")
        if (
            not isinstance(rating, int)
            or isinstance(rating, bool)
            or not 1 <= rating <= max_labels()
        ):
            return (
                f"{from_name!r}: rating {str(rating)[:20]} is not a whole number from 1 to "
                f"{max_labels()} (the setting QUESTION_MAX_LABELS)."
            )
        answer = str(rating)
    scale = parsed.scales.setdefault(from_name, _Scale(kind))
    if scale.type != kind:
        return f"{from_name!r} is both {scale.type} and {kind}."
    if scale.fixed and answer not in scale.values:
        return f"{from_name!r}: {answer!r} is not in the labelling configuration."
    scale.values.setdefault(answer)
    parsed.answers.append((item, annotator, from_name, answer, ms))
    return None


def _keys(names: list[str], *, prefix: str) -> dict[str, str]:
    """A distinct slug of at most :data:`KEY_LENGTH` characters for each name."""
    keys: dict[str, str] = {}
    for n, name in enumerate(names, start=1):
        base = slugify(name)[:KEY_LENGTH] or f"{prefix}-{n}"
        key, k = base, 2
        while key in keys.values():
            key = f"{base[: KEY_LENGTH - 4]}-{k}"
            k += 1
        keys[name] = key
    return keys


def _store(parsed: _Parsed, *, manager: AbstractBaseUser, name: str) -> Study:
    per_task = defaultdict(set)
    for item, annotator, *_ in parsed.answers:
        per_task[item].add(annotator)
    study = study_create(
        creator=manager,
        name=name,
        instructions="Imported from a Label Studio JSON export.",
        overlap=max((len(a) for a in per_task.values()), default=1),
    )
    question_keys = _keys(list(parsed.scales), prefix="question")
    label_keys: dict[str, dict[str, str]] = {}
    for from_name, scale in parsed.scales.items():
        values = list(scale.values)
        if scale.type == "rating":
            values = [str(r) for r in range(1, max(int(v) for v in values) + 1)]
        label_keys[from_name] = _keys(values, prefix="label")
        question_create(
            study=study,
            key=question_keys[from_name],
            prompt=from_name,
            ordered=scale.type == "rating",
            labels=[{"key": label_keys[from_name][v], "name": v[:100]} for v in values],
        )
    items_bulk_create(study=study, rows=parsed.items)
    annotators = {key for _, key, *_ in parsed.answers}
    users = {key: _import_user(study, key) for key in sorted(annotators)}
    for user in users.values():
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    annotations_import_finished(
        study=study,
        records=[
            FinishedAnnotation(
                item=item,
                annotator=users[annotator].get_username(),
                question=question_keys[from_name],
                value=label_keys[from_name][value],
                time_spent_ms=ms,
            )
            for item, annotator, from_name, value, ms in parsed.answers
        ],
    )
    study_set_status(study=study, status=Study.Status.CLOSED)
    return study


def _import_user(study: Study, key: str) -> AbstractBaseUser:
    """A new account that cannot sign in, for one Label Studio annotator of this import."""
    user = get_user_model()(username=f"ls{study.pk}-{slugify(key) or 'user'}"[:150])
    user.set_unusable_password()
    user.save()
    return user


def label_studio_tasks(*, study: Study, identity: str = USERNAMES) -> list[dict[str, Any]]:
    """The study's items as Label Studio tasks, with each annotator's current categorical
    answers as one annotation (``choices`` results, ``from_name`` the question key)."""
    name = annotator_names(study_id=study.pk, identity=identity)
    answers: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    rows = (
        current_annotations(study=study)
        .filter(question__kind=Question.Kind.CATEGORICAL, round=1)
        .values_list(
            "item_id", "annotator__username", "question__key", "current_revision__label__key"
        )
    )
    for item_id, username, question, label in rows.iterator(chunk_size=2000):
        answers[item_id][username].append(
            {
                "type": "choices",
                "from_name": question,
                "to_name": "stimulus",
                "value": {"choices": [label]},
            }
        )
    return list(_tasks(study, answers, name))


def _tasks(
    study: Study,
    answers: Mapping[int, Mapping[str, list[dict[str, Any]]]],
    name: Callable[[str], str],
) -> Iterator[dict[str, Any]]:
    for item in study.items.order_by("position", "id"):
        data: dict[str, Any] = {"external_id": item.external_id, "text": item.text}
        if item.url:
            data[item.kind] = item.url
        yield {
            "data": data,
            "annotations": [
                {
                    "completed_by": {"email": f"{name(username)}@annotation-studio.invalid"},
                    "result": results,
                    "was_cancelled": False,
                    "ground_truth": False,
                }
                for username, results in sorted(answers.get(item.pk, {}).items())
            ],
        }


def label_studio_config(*, study: Study) -> str:
    """The Label Studio labelling configuration (XML) for :func:`label_studio_tasks`: the text,
    then one single-choice block per categorical question, choices named by label key."""
    blocks = ["<View>", '  <Text name="stimulus" value="$text"/>']
    for question in study.questions.filter(kind=Question.Kind.CATEGORICAL).prefetch_related(
        "labels"
    ):
        blocks.append(f"  <Header value={quoteattr(question.prompt)}/>")
        blocks.append(
            f'  <Choices name={quoteattr(question.key)} toName="stimulus" choice="single">'
        )
        blocks += [
            f"    <Choice value={quoteattr(label.key)} hint={quoteattr(label.name)}/>"
            for label in question.labels.all()
        ]
        blocks.append("  </Choices>")
    blocks.append("</View>")
    return "\n".join(blocks) + "\n"
