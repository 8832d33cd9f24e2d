# rankmap summa arrangement: the worked example of Malik et al. (HCW 2014, seed 004),
# the layout the slides call the worst case: cost_A = 2 x (11+3+3+3+4+2+6) = 64,
# cost_B = 1x12 + 2x12 + 3x9 = 63, norm sqrt(64^2 + 63^2) = 89.80.
# The slides draw it without numbers; this 33 x 33 layout of ten rectangles in three
# columns (widths 12, 12, 9) was reconstructed by a search: it reproduces both of
# their band lists exactly.  Clusters: the file "clusters" beside this one.
#
# <nranks> <N>, then: rank column position row_offset col_offset height width
10 33
0 0 0 0 0 14 12
1 0 1 14 0 10 12
2 0 2 24 0 9 12
3 1 0 0 12 17 12
4 1 1 17 12 15 12
5 1 2 32 12 1 12
6 2 0 0 24 11 9
7 2 1 11 24 9 9
8 2 2 20 24 6 9
9 2 3 26 24 7 9
