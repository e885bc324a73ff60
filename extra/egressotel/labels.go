package egressotel

import "github.com/egress-go/egress/internal/metriclabel"

// Other is the attribute value that stands for every key or server address beyond the
// allow-list or the cap ([WithKeys], [WithMaxKeys]).
const Other = metriclabel.Other
