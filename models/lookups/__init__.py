"""What is known about a visitor from outside the request's parameters: geo, user agent, bots."""
