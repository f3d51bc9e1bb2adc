"""Former home of the answering API, kept so ``from qa_finetune.infer import ...`` still works.

New code imports from ``qa_finetune.inference`` (or the package root).
"""

from qa_finetune.inference.answerer import QuestionAnswerer, get_answer

__all__ = ["QuestionAnswerer", "get_answer"]
