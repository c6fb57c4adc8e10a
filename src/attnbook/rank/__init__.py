"""Part I, rank collapse (Dong, Cordonnier and Loukas 2021): the path decomposition (:mod:`.paths`), the
search for worst cases of the one-layer bound (:mod:`.bound_search`), the deep bounds (:mod:`.deep_bound`) and
the tasks the part trains on (:mod:`.tasks`)."""
