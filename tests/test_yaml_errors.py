"""Tests for simulation.yaml_errors: the strict YAML loader and its one-line errors."""

from __future__ import annotations

import pytest
import yaml

from simulation.yaml_errors import describe_yaml_error, load_yaml


def test_a_key_given_twice_is_refused_with_its_line():
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml("years: 2\nmemory:\n  decay_rate: 0.9\n  decay_rate: 0.8\n")
    assert describe_yaml_error(info.value).startswith(
        "line 4, column 3: duplicate key 'decay_rate'"
    )


def test_equal_keys_in_different_mappings_and_merge_keys_are_fine():
    text = (
        "defaults: &d {importance: 0.5, tags: [flood]}\n"
        "minor: {<<: *d, importance: 0.6}\n"
        "major: {<<: *d, importance: 0.9}\n"
    )
    data = load_yaml(text)
    assert data["minor"] == {"importance": 0.6, "tags": ["flood"]}
    assert data["major"]["importance"] == 0.9


def test_only_safe_yaml_is_loaded():
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']\n")
