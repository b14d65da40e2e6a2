"""The HTTP face of a server: the REST API, the dashboard, and who may call them.

Handlers only read the store or record a request in it; the controller does
the rest. Everything here sits on top of ``state``; nothing below imports it.
"""
