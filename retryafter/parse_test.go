package retryafter_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/retryafter"
)

// rfcNow is 30 seconds before RFC 9110's example date,
// Sun, 06 Nov 1994 08:49:37 GMT.
var rfcNow = time.Date(1994, 11, 6, 8, 49, 7, 0, time.UTC)

type parseValueTest struct {
	name string
	give string
	want time.Duration
}

func parseValueTests() []parseValueTest {
	return []parseValueTest{
		{name: "zero", give: "0", want: 0},
		{name: "delay-seconds", give: "120", want: 120 * time.Second},
		{name: "Slack", give: "30", want: 30 * time.Second},
		{name: "Shopify decimal", give: "2.0", want: 2 * time.Second},
		{name: "fraction", give: "2.5", want: 2500 * time.Millisecond},
		{name: "millisecond", give: "0.001", want: time.Millisecond},
		{name: "leading zeros", give: "007", want: 7 * time.Second},
		{name: "digits past nanoseconds dropped", give: "1.0000000019", want: time.Second + time.Nanosecond},
		{name: "ceiling exactly", give: "2678400", want: retryafter.MaxDelayValue},
		{name: "above ceiling", give: "2678401", want: retryafter.MaxDelayValue},
		{name: "max int64", give: "9223372036854775807", want: retryafter.MaxDelayValue},
		{name: "beyond uint64", give: "99999999999999999999999999999999", want: retryafter.MaxDelayValue},
		{name: "huge with fraction", give: "18446744073709551616.5", want: retryafter.MaxDelayValue},
		{name: "IMF-fixdate", give: "Sun, 06 Nov 1994 08:49:37 GMT", want: 30 * time.Second},
		{name: "RFC 850", give: "Sunday, 06-Nov-94 08:49:37 GMT", want: 30 * time.Second},
		{name: "asctime", give: "Sun Nov  6 08:49:37 1994", want: 30 * time.Second},
		{name: "date now", give: "Sun, 06 Nov 1994 08:49:07 GMT", want: 0},
		{name: "date in the past", give: "Sun, 06 Nov 1994 08:48:37 GMT", want: 0},
		{name: "date far in the past", give: "Thu, 01 Jan 1970 00:00:00 GMT", want: 0},
		{name: "date 100 years out", give: "Fri, 06 Nov 2094 08:49:37 GMT", want: retryafter.MaxDelayValue},
		{name: "last date", give: "Fri, 31 Dec 9999 23:59:59 GMT", want: retryafter.MaxDelayValue},
	}
}

func TestParseValue(t *testing.T) {
	for _, tt := range parseValueTests() {
		t.Run(tt.name, func(t *testing.T) {
			got, err := retryafter.ParseValue(tt.give, rfcNow)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func invalidValues() []string {
	return []string{
		"",
		" ",
		"\t",
		"+5",
		"-5",
		"-0",
		"+0",
		"1e3",
		"1E3",
		"1.5e2",
		"NaN",
		"nan",
		"Inf",
		"+Inf",
		"-Inf",
		"Infinity",
		"0x10",
		"0X1F",
		"0b101",
		"1_000",
		" 5",
		"5 ",
		"5\n",
		"5s",
		"5ms",
		"12abc",
		"120, 120",
		"1.",
		".5",
		"1..2",
		"1.2.3",
		"1,5",
		"١٢",
		"１２",
		"\x00",
		"tomorrow",
		"Sun, 06 Nov 1994",
		"Sun, 06 Nov 1994 08:49:37 GMT garbage",
		" Sun, 06 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37 PST",
		"Sun, 06 Nov 1994 08:49:37 +0000",
		"1994-11-06T08:49:37Z",
		"Sun, 32 Nov 1994 08:49:37 GMT",
		strings.Repeat("1", retryafter.MaxValueLen+1),
		"Sun, 06 Nov 1994 08:49:37 GMT" + strings.Repeat(" ", retryafter.MaxValueLen),
	}
}

func TestParseValueInvalid(t *testing.T) {
	for _, give := range invalidValues() {
		t.Run(strconv.Quote(give), func(t *testing.T) {
			got, err := retryafter.ParseValue(give, rfcNow)
			require.ErrorIs(t, err, retryafter.ErrInvalid)
			assert.True(t, strings.HasPrefix(err.Error(), "retryafter: "), err.Error())
			assert.Contains(t, err.Error(), strconv.Quote(give[:min(len(give), retryafter.MaxValueLen)]))
			assert.Equal(t, time.Duration(0), got)
		})
	}
}

func TestParseValueLongestValid(t *testing.T) {
	give := "1." + strings.Repeat("0", retryafter.MaxValueLen-2)
	got, err := retryafter.ParseValue(give, rfcNow)
	require.NoError(t, err)
	assert.Equal(t, time.Second, got)
}
