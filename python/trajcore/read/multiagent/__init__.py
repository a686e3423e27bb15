"""Multi-agent recordings: which agent each recording holds and the episodes of some agents
(`agents`), and the joint view of the agents of one env episode aligned on the env's steps
(`env_episodes`, grouped and sampled by the plan in `joint_plan`).
"""
