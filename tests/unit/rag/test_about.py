import pytest

from sub250.errors import ConfigError
from sub250.rag.about import About, read_about
from sub250.rag.kb import SAMPLE_KB


def test_the_texts_name_the_company_and_the_scope_and_neither_without_them():
    acme = About("Acme Rockets", "Acme rockets and their launch pads")
    assert acme.instructions.startswith("You are the voice support agent of Acme Rockets. Answer")
    assert acme.decline_text == "Sorry, I can only help with questions about Acme rockets and their launch pads."
    assert acme.idle_text.endswith("questions about Acme rockets and their launch pads.")
    plain = About()
    assert "agent of" not in plain.instructions and "about" not in plain.decline_text


def test_the_sample_kb_says_it_is_halden_s(tmp_path):
    assert read_about(SAMPLE_KB).company == "Halden Labs"
    assert read_about(tmp_path) is None  # a folder without about.toml


@pytest.mark.parametrize("text, named", [
    ('company = "A"\nslogan = "x"\n', "slogan"),
    ("company = 5\n", "company"),
    (f'scope = "{"x" * 301}"\n', "scope"),
    ("company = \n", "TOML"),
])
def test_a_bad_about_is_an_error_naming_what_is_wrong(tmp_path, text, named):
    (tmp_path / "about.toml").write_text(text)
    with pytest.raises(ConfigError) as err:
        read_about(tmp_path)
    assert named in str(err.value) or named in err.value.hint


def test_whitespace_is_squashed(tmp_path):
    (tmp_path / "about.toml").write_text('company = "  Acme\\n Labs "\n')
    assert read_about(tmp_path) == About("Acme Labs", "")
