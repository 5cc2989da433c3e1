Bej
locationweights.binj
offset0j
length8p