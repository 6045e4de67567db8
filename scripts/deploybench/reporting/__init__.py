"""The reports, built from the files the pipeline wrote: Markdown tables and perf_analyzer's
settings in words (markdown), the headlines (headline), served against native
(served_native), the published tables beside ours (reference), a configuration's README
(configuration_report, with its rate section: rate), a model's (model_report), a
configuration search's (search_report), the regression reports (compare), the plots (plots)
and a README as one HTML page (html_page). The steps of deploybench.steps call them and
write what they return; nothing here starts a server or runs a step."""
