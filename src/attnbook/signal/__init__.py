"""Part II, signal propagation (Noci et al. 2022): gradients and Jacobians at initialisation
(:mod:`.propagation`), the sequence-reversal task and its optimiser sweep (:mod:`.reverser`), and the part's
figures (:mod:`.jacobian_figures`, :mod:`.reverser_figures`)."""
