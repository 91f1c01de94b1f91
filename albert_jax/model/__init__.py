"""The model: `config` (AlbertConfig: shape and sharing layout), `presets`, `albert` (the encoder
with factorized embeddings and `nn.scan`-shared or per-layer blocks, pretraining heads), `sharing`
(unsharing = tiling along the layer axis; groups; partial sharing), `heads` (fine-tuning heads),
`electra`, `decoding` (prefix-LM generation) and `losses`. Reads nothing from disk."""
