"""Finding the passages of a collection that may answer a question: passages, the index on
disk, and the retriever that searches it."""
