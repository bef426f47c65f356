"""Item import from CSV and JSON Lines: parsing, validation with line and field, updates."""

from __future__ import annotations

import io
import json
import time

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.annotations.models import Assignment
from apps.items.importing import MAX_ERRORS, ItemImportError, RowError, format_for_name
from apps.items.models import Item
from apps.items.services import ImportSummary, items_bulk_create, items_import
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db


def csv_stream(*lines: str, bom: bool = False) -> io.BytesIO:
    return io.BytesIO((("\ufeff" if bom else "") + "\n".join(lines) + "\n").encode())


def jsonl_stream(*objects: object) -> io.StringIO:
    return io.StringIO(
        "\n".join(obj if isinstance(obj, str) else json.dumps(obj) for obj in objects) + "\n"
    )


def import_error(study, stream, fmt: str = "csv") -> ItemImportError:
    with pytest.raises(ItemImportError) as caught:
        items_import(study=study, stream=stream, fmt=fmt)
    return caught.value


@pytest.fixture
def study():
    return StudyFactory()


def test_csv_import_creates_items_with_metadata_and_tolerates_a_bom(study):
    stream = csv_stream(
        "external_id,kind,text,url,speaker,metadata",
        'a1,text,"Hello, world",,Ann,"{""lang"": ""en""}"',
        "a2,image,,https://example.org/cat.jpg,,",
        bom=True,
    )
    assert items_import(study=study, stream=stream, fmt="csv") == ImportSummary(2, 0)
    a1, a2 = Item.objects.filter(study=study).order_by("position")
    assert (a1.external_id, a1.kind, a1.text) == ("a1", "text", "Hello, world")
    assert a1.metadata == {"lang": "en", "speaker": "Ann"}
    assert (a2.kind, a2.url, a2.metadata) == ("image", "https://example.org/cat.jpg", {})


def test_an_uploaded_file_is_read_as_it_comes_from_a_form(study):
    upload = SimpleUploadedFile("items.csv", "external_id,text\r\nu1,Grüße\r\n".encode())
    upload.read(5)  # a form may have peeked at it
    assert items_import(study=study, stream=upload, fmt="csv").created == 1
    assert study.items.get().text == "Grüße"
    assert not upload.closed


def test_jsonl_import_accepts_text_and_byte_streams(study):
    rows = [
        {"external_id": 7, "text": "Seven", "metadata": {"source": "x"}},
        "",
        {"external_id": "v1", "kind": "video", "url": "https://example.org/v.mp4", "fps": 25},
    ]
    assert items_import(study=study, stream=jsonl_stream(*rows), fmt="jsonl").created == 2
    assert Item.objects.get(external_id="7").metadata == {"source": "x"}
    assert Item.objects.get(external_id="v1").metadata == {"fps": 25}
    other = StudyFactory()
    stream = io.BytesIO(jsonl_stream(*rows).getvalue().encode("utf-8-sig"))
    assert items_import(study=other, stream=stream, fmt="jsonl").created == 2


def test_new_items_are_queued_after_existing_ones(study):
    ItemFactory(study=study, position=41)
    items_import(study=study, stream=csv_stream("external_id,text", "n1,a", "n2,b"), fmt="csv")
    assert list(study.items.order_by("position").values_list("position", flat=True)) == [
        41,
        42,
        43,
    ]


def test_reimport_updates_instead_of_duplicating(study):
    items_import(study=study, stream=csv_stream("external_id,text,topic", "a,old,x"), fmt="csv")
    first = Item.objects.get(study=study, external_id="a")
    summary = items_import(
        study=study,
        stream=csv_stream("external_id,text,topic", "a,new,y", "b,fresh,z"),
        fmt="csv",
    )
    assert summary == ImportSummary(created=1, updated=1)
    item = Item.objects.get(study=study, external_id="a")
    assert (item.pk, item.text, item.metadata, item.position) == (
        first.pk,
        "new",
        {"topic": "y"},
        first.position,
    )
    assert item.updated_at > first.updated_at
    assert study.items.count() == 2


def test_reimporting_the_same_values_writes_nothing(study):
    lines = ("external_id,text,topic", "a,same,x", "b,same,y")
    items_import(study=study, stream=csv_stream(*lines), fmt="csv")
    stamps = dict(study.items.values_list("external_id", "updated_at"))
    with CaptureQueriesContext(connection) as queries:
        summary = items_import(study=study, stream=csv_stream(*lines), fmt="csv")
    assert summary == ImportSummary(created=0, updated=2)
    assert not [q for q in queries if q["sql"].startswith(("INSERT", "UPDATE"))]
    assert dict(study.items.values_list("external_id", "updated_at")) == stamps


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["external_id,text", ",no id"], "line 2, field external_id: This field cannot be blank."),
        (
            ["external_id,kind,url", "a,image,https://ok.org/a.png", "b,image,not a url"],
            "line 3, field url: Enter a valid URL.",
        ),
        (["external_id,kind,text", "a,poem,x"], "line 2, field kind: Value 'poem' is not a valid"),
        (["external_id,text", "a,"], "line 2, field text: A text item needs its text."),
        (["external_id,kind", "a,audio"], "line 2, field url: A audio item needs an uploaded"),
        (
            ["external_id,text", "a,x", "b,y", "a,z"],
            "line 4, field external_id: Duplicate of line 2",
        ),
        (["external_id,text,metadata", "a,x,{oops"], "line 2, field metadata: Not valid JSON"),
        (["external_id,text,metadata", "a,x,[1]"], "line 2, field metadata: Enter a JSON object."),
        (["external_id,text", "a,x,surplus"], "line 2: 3 cells but the header names 2 columns."),
        (["external_id,kind,media", "a,image,cat.png"], "line 2, field media: No uploaded file"),
        (["text", "a"], "line 1, field external_id: The header row needs an external_id column."),
        (["external_id,text,text", "a,b,c"], "line 1, field text: This column appears twice."),
        ([f"external_id,text\n{'x' * 201},a"], "line 2, field external_id: Ensure this value"),
    ],
)
def test_each_csv_error_names_line_and_field(study, lines, expected):
    error = import_error(study, csv_stream(*lines))
    assert str(error.errors[0]).startswith(expected)
    assert error.messages[0] == str(error.errors[0])
    assert isinstance(error, ValidationError)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "line 2: Not valid JSON"),
        ("[1, 2]", "line 2: Each line must hold one JSON object."),
        ('{"external_id": "b", "text": ["a"]}', "line 2, field text: Enter a text value."),
        (
            '{"external_id": "b", "text": "x", "metadata": 3}',
            "line 2, field metadata: Enter a JSON",
        ),
    ],
)
def test_each_jsonl_error_names_line_and_field(study, line, expected):
    error = import_error(study, jsonl_stream({"external_id": "a", "text": "fine"}, line), "jsonl")
    assert str(error.errors[0]).startswith(expected)


def test_bytes_that_are_not_utf8_name_their_line(study):
    stream = io.BytesIO(b"external_id,text\na,fine\nb,caf\xe9\n")
    assert import_error(study, stream).errors == [RowError(3, "", "The file is not UTF-8 text.")]


def test_line_numbers_count_the_header_blank_lines_and_multiline_cells(study):
    stream = csv_stream("external_id,url,kind", 'a,,"image"', "", '"b\nc",nope,image', "d,,image")
    assert [(e.line, e.field) for e in import_error(study, stream).errors] == [
        (2, "url"),
        (4, "url"),
        (6, "url"),
    ]


def test_all_errors_are_collected_up_to_a_limit_and_nothing_is_stored(study):
    ItemFactory(study=study, external_id="keep", text="original")
    lines = ["external_id,text", "keep,changed", "new,fine"] + [f"bad{n}," for n in range(80)]
    error = import_error(study, csv_stream(*lines))
    assert len(error.errors) == MAX_ERRORS
    assert error.truncated
    assert error.errors[0] == RowError(4, "text", "A text item needs its text.")
    assert error.messages[-1].startswith(f"Stopped after {MAX_ERRORS} errors")
    assert list(study.items.values_list("external_id", "text")) == [("keep", "original")]


def test_errors_in_a_later_batch_roll_back_earlier_batches(study):
    lines = ["external_id,text"] + [f"i{n},ok" for n in range(1200)] + ["last,"]
    assert import_error(study, csv_stream(*lines)).errors == [
        RowError(1202, "text", "A text item needs its text.")
    ]
    assert not study.items.exists()


def test_media_names_refer_to_uploaded_files(study, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("cat.png", b"\x89PNG fake", content_type="image/png")
    summary = items_import(
        study=study,
        stream=csv_stream("external_id,kind,media", "c1,image,cat.png"),
        fmt="csv",
        files={"cat.png": upload},
    )
    assert summary.created == 1
    item = study.items.get()
    assert item.media.name.endswith(".png")
    assert item.media.read() == b"\x89PNG fake"
    renamed = SimpleUploadedFile("cat2.png", b"\x89PNG second", content_type="image/png")
    items_import(
        study=study,
        stream=csv_stream("external_id,kind,media", "c1,image,cat2.png"),
        fmt="csv",
        files={"cat2.png": renamed},
    )
    item.refresh_from_db()
    assert item.media.read() == b"\x89PNG second"


def test_new_items_of_a_running_study_reach_the_queues(study_setup):
    study, annotators = study_setup
    before = Assignment.objects.filter(study=study, round=1).count()
    items_import(study=study, stream=csv_stream("external_id,text", "late,Late item"), fmt="csv")
    late = Assignment.objects.filter(study=study, item__external_id="late", round=1)
    assert late.count() == len(annotators)
    assert Assignment.objects.filter(study=study, round=1).count() == before + len(annotators)


def test_bulk_create_validates_like_the_files(study):
    rows = [{"external_id": "a", "text": "A"}, {"external_id": "b", "kind": "image", "url": "x"}]
    with pytest.raises(ItemImportError) as caught:
        items_bulk_create(study=study, rows=rows)
    assert [str(e) for e in caught.value.errors] == ["line 2, field url: Enter a valid URL."]
    assert not study.items.exists()
    rows[1]["url"] = "https://example.org/b.jpg"
    assert items_bulk_create(study=study, rows=rows) == ImportSummary(2, 0)


def test_unknown_formats_are_refused(study):
    with pytest.raises(ValidationError, match="Unknown format"):
        items_import(study=study, stream=io.BytesIO(b""), fmt="xlsx")
    assert format_for_name("Items.CSV") == "csv"
    assert format_for_name("items.ndjson") == "jsonl"
    with pytest.raises(ValidationError, match="Cannot tell the format"):
        format_for_name("items.txt")


def test_fifteen_thousand_rows_import_with_a_bounded_number_of_queries(
    study, django_assert_max_num_queries
):
    lines = ["external_id,text,group"] + [f"r{n},Sentence {n}.,g{n % 7}" for n in range(15_000)]
    stream = csv_stream(*lines)
    started = time.perf_counter()
    with django_assert_max_num_queries(400):
        summary = items_import(study=study, stream=stream, fmt="csv")
    elapsed = time.perf_counter() - started
    assert summary == ImportSummary(15_000, 0)
    assert study.items.count() == 15_000
    print(f"15,000-row CSV import: {elapsed:.2f} s")  # shown with -s; no timed assertion


class TestCommand:
    def test_imports_and_reports_counts(self, study, tmp_path):
        path = tmp_path / "items.jsonl"
        path.write_text('{"external_id": "a", "text": "A"}\n{"external_id": "b", "text": "B"}\n')
        out = io.StringIO()
        call_command("import_items", str(study.pk), str(path), stdout=out)
        assert out.getvalue().strip() == "created 2, updated 0"
        call_command("import_items", str(study.pk), str(path), stdout=out)
        assert out.getvalue().strip().endswith("created 0, updated 2")

    def test_errors_go_to_stderr_with_exit_code_2_and_store_nothing(self, study, tmp_path):
        path = tmp_path / "items.txt"
        path.write_text("external_id,kind,url\na,image,https://ok.org/a.png\nb,image,nope\n")
        err = io.StringIO()
        with pytest.raises(CommandError) as caught:
            call_command("import_items", str(study.pk), str(path), "--format", "csv", stderr=err)
        assert caught.value.returncode == 2
        assert "line 3, field url: Enter a valid URL." in err.getvalue()
        assert "nothing was imported" in str(caught.value)
        assert not study.items.exists()

    def test_unknown_study_or_extension(self, study, tmp_path):
        path = tmp_path / "items.txt"
        path.write_text("external_id,text\na,b\n")
        with pytest.raises(CommandError, match="No study with id 0"):
            call_command("import_items", "0", str(path))
        with pytest.raises(CommandError, match="Cannot tell the format"):
            call_command("import_items", str(study.pk), str(path))
