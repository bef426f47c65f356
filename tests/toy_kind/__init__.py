"""A test-only question kind (a rating from 0 to 10) that proves the recipe of
docs/adding-a-question-kind.md: one new folder and one line in ``QUESTION_KINDS``."""
