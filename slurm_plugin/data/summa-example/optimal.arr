# rankmap summa arrangement: the slides' "optimal" arrangement of worst.arr (the same
# rectangles restacked inside their columns): cost_A = 1 x (6+8) + 2 x (1+9+2+6) = 50,
# cost_B = 1x12 + 2x12 + 2x9 = 54, norm sqrt(50^2 + 54^2) = 73.59.  On this
# reconstruction it is not the cheapest: the heuristic finds 35/54 (64.35) and
# exhaustive search 33/54 (63.29).
#
# <nranks> <N>, then: rank column position row_offset col_offset height width
10 33
0 0 2 19 0 14 12
1 0 1 9 0 10 12
2 0 0 0 0 9 12
3 1 0 0 12 17 12
4 1 2 18 12 15 12
5 1 1 17 12 1 12
6 2 0 0 24 11 9
7 2 2 18 24 9 9
8 2 3 27 24 6 9
9 2 1 11 24 7 9
