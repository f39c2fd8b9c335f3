"""The crawler's download handler and DNS cache."""
