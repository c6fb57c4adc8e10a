"""Part III, heads (Voita et al. 2019; Michel et al. 2019): the translation model (:mod:`.seq2seq`), its data,
training and decoding (:mod:`.translation`), head roles (:mod:`.roles`), relevance by LRP (:mod:`.lrp`), head
masks (:mod:`.masks`), hard-concrete gates and their training (:mod:`.gates`, :mod:`.gate_training`), Michel et
al.'s importance pruning (:mod:`.importance`) and the analysis of the shipped pruning runs (:mod:`.sweeps`)."""
