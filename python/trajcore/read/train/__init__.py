"""Feeding a learner: steps numbered over a dataset or a selection and read by batch, block or
window (`transitions`), a transition replay held in a torch device's memory (`device`), and
batches drawn from several datasets at fixed shares (`mix`).
"""
