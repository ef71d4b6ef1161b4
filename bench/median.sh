# Sourced by the bench scripts: median reads numbers, one a line, and prints
# their median (the mean of the middle two for an even count; nothing for none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
