# Shows that the e2e runner detects a wrong golden: this script's golden is deliberately wrong,
# and ctest marks the test WILL_FAIL, so the suite fails if the runner ever stops comparing.
echo "the real output"
