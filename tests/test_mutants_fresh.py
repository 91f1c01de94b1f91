"""tests/mutants.py cannot rot silently: every mutant still applies to today's code (its file
exists and its snippet occurs there exactly once) and every test it names is defined, so a move
or a rewrite fails here, in the default suite, rather than in the next mutation run."""

from __future__ import annotations

import dataclasses

import mutants
import pytest

SLOW = "tests/test_electra.py::test_discriminator_loss_sends_no_gradient_into_the_generator"


def test_every_mutant_applies_and_names_defined_tests():
    mutants.check(mutants.MUTANTS)  # StaleMutant lists each stale mutant


def test_ci_subset_names_known_mutants_once():
    known = {m.id for m in mutants.MUTANTS}
    assert sorted(set(mutants.CI_MUTANTS) - known) == []
    assert len(set(mutants.CI_MUTANTS)) == len(mutants.CI_MUTANTS)


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"file": "albert_jax/model.py"}, "albert_jax/model.py does not exist"),
        ({"original": "import"}, "the original snippet occurs"),
        ({"tests": ("tests/test_losses.py::test_gone",)}, "defines no test 'test_gone'"),
        ({"tests": ("tests/gone.py",)}, "is not a file or node id under tests/"),
        ({"tests": ("tests/test_electra.py", SLOW)}, "is marked slow but runs beside a whole"),
    ],
    ids=["moved-file", "snippet-not-once", "undefined-test", "not-a-test-file", "slow-beside-file"],
)
def test_check_refuses_a_stale_mutant(change, problem):
    stale = dataclasses.replace(mutants.MUTANTS[0], **change)
    with pytest.raises(mutants.StaleMutant, match=problem):
        mutants.check([stale])
