"""The spine: what stands between the policy core and a body, written once.

A body (the simulator, the runtime) owns time and processes; the policy owns
decisions. Everything in between lives here, pure, and serves both bodies:

* ``actions`` — the previous and the new ``Plan`` diffed into one list of
  actions (launch, stop, suspend, resume), and the one definition of every
  counted event (start, resize, migration, restart, suspend, resume);
* ``observe`` — folding measured minibatch times into per-size and
  per-partner profiles, and who runs beside whom;
* ``views`` — the policy's frozen ``JobView`` built from what a body knows;
* ``deciding`` — the one call of ``Policy.decide``, with the garbage
  collector paused while a large decision runs;
* ``needs`` — what a policy needs, what each body supplies, and the policy
  adapted to a body or refused with the reason.

Like Kubernetes' split between its scheduling cycle and its binding cycle:
``decide`` is the scheduling cycle, a body applying ``diff`` is the binding.
"""
