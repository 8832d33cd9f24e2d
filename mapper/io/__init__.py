"""File formats: one module per format, text or bytes in, library objects out.

Graphs (communication profiles): :mod:`.graph_file` reads any of them by suffix or
name (:func:`~.graph_file.read_graph`) through the per-format readers :mod:`.metis_file`,
:mod:`.mtx_file`, :mod:`.csv_file` and :mod:`.npz_file`; :mod:`.graph_format` holds what
they share (:class:`~.graph_format.GraphFormatError`, the size limit, byte scans).
Other files: :mod:`.mesh_file` (meshes with vertex weights), :mod:`.arity_file` (the
hardware information file), :mod:`.distance_matrix_file` (an explicit machine),
:mod:`.mapping_file` (one PE per rank), :mod:`.partition_file` (one rank per mesh
vertex), :mod:`.summa_files` (SUMMA speeds, groups,
arrangement).
Reading safely: :mod:`.regular_file` (a regular file of bounded size, opened once) and
:mod:`.text_lines` (the ``#``-comment line convention, read lazily).

Nothing is imported here: :mod:`.regular_file` and :mod:`.text_lines` are standard
library only, and the Slurm TaskProlog imports them without loading numpy.
"""
