"""What every part of the book shares: attention and the SAN/Transformer block (:mod:`.attention`), the (1,inf)
norm and the residual (:mod:`.norms`), one training loop (:mod:`.train`), checkpoint files
(:mod:`.checkpoints`), the preset table, seeding and device choice (:mod:`.presets`), the figure style
(:mod:`.plotting`), the shipped English sample (:mod:`.text`) and the table of named runs that made every
shipped file (:mod:`.runs`). Nothing here imports another part of the library."""
