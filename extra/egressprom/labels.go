package egressprom

import "github.com/egress-go/egress/internal/metriclabel"

// Other is the label value that stands for every key or host beyond the
// allow-list or the cap ([WithKeys], [WithMaxKeys]).
const Other = metriclabel.Other
