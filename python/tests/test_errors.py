"""Bad specs raise `fairlane.SpecError` naming the file and the field."""

import pickle

import pytest

import fairlane


def test_bad_field_in_a_file(small_spec):
    bad = small_spec.read_text().replace("rate = 1000.0", "rate = -3.0")
    small_spec.write_text(bad)
    with pytest.raises(fairlane.SpecError) as e:
        fairlane.simulate(small_spec)
    assert e.value.file == str(small_spec)
    assert e.value.field == "server.rate"
    assert str(small_spec) in str(e.value) and "server.rate" in str(e.value)


def test_unknown_field_in_an_override(small_spec):
    with pytest.raises(fairlane.SpecError) as e:
        fairlane.simulate(small_spec, set={"server.workerz": 3})
    assert e.value.field == "server.workerz"
    assert "unknown field" in e.value.message


def test_dict_and_text_are_named(small_spec):
    with pytest.raises(fairlane.SpecError) as e:
        fairlane.simulate({"name": "x", "duration": "long"})
    assert e.value.file == "<dict>" and e.value.field == "duration"
    with pytest.raises(fairlane.SpecError) as e:
        fairlane.simulate("name = \n")
    assert e.value.file == "<string>" and "TOML" in e.value.message


def test_missing_file_and_pickling():
    with pytest.raises(fairlane.SpecError) as e:
        fairlane.simulate("no/such/spec.toml")
    assert e.value.file == "no/such/spec.toml"
    back = pickle.loads(pickle.dumps(e.value))
    assert (back.file, back.field, back.message) == (e.value.file, e.value.field, e.value.message)


def test_refused_run_is_a_simulation_error(small_spec):
    with pytest.raises(fairlane.SimulationError):
        fairlane.simulate(small_spec, max_events=10)
